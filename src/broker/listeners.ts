import type { Warn } from "./policy.js";
import type { Unsubscribe } from "./types.js";

/** A set of callbacks. A throwing listener is reported as a warning and never stops the others. */
export class Listeners<E> {
  private readonly handlers = new Set<(event: E) => void>();

  constructor(private readonly warn: Warn) {}

  add(handler: (event: E) => void): Unsubscribe {
    this.handlers.add(handler);
    return () => {
      this.handlers.delete(handler);
    };
  }

  get size(): number {
    return this.handlers.size;
  }

  emit(event: E): void {
    for (const handler of this.handlers) {
      try {
        handler(event);
      } catch (error) {
        this.warn(`an event listener threw: ${String(error)}`);
      }
    }
  }

  clear(): void {
    this.handlers.clear();
  }
}
