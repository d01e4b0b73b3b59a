/**
 * Exactly-once for the application on top of the gateway's at-least-once delivery. Every delivery
 * id the agent has started is remembered: a redelivery of one still being processed is ignored (the
 * running processing acknowledges it), a redelivery of a finished one is only acknowledged. Finished
 * ids are kept up to `capacity` (oldest forgotten first), far more than the gateway ever redelivers.
 */
export class DeliveryLedger {
  private readonly processing = new Set<string>();
  private readonly done = new Set<string>();

  constructor(private readonly capacity = 100_000) {}

  state(id: string): "new" | "processing" | "done" {
    if (this.processing.has(id)) return "processing";
    return this.done.has(id) ? "done" : "new";
  }

  start(id: string): void {
    this.processing.add(id);
  }

  finish(id: string): void {
    this.processing.delete(id);
    this.done.add(id);
    if (this.done.size > this.capacity) {
      const oldest = this.done.values().next().value;
      if (oldest !== undefined) this.done.delete(oldest);
    }
  }

  /** Processing was abandoned (the agent is closing): the gateway's redelivery will bring it back. */
  abandon(id: string): void {
    this.processing.delete(id);
  }

  get inProgress(): number {
    return this.processing.size;
  }
}
