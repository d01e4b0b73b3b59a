/**
 * Work queued under one key runs one piece at a time, in the order it was queued; different keys
 * run concurrently. Work starts synchronously when nothing is waiting for its key, so what it does
 * right away (a publish, a write) keeps the callers' order. A failure does not stop the queue.
 */
export class SerialByKey {
  private readonly tails = new Map<string, Promise<void>>();

  run<R>(key: string, work: () => Promise<R>): Promise<R> {
    const before = this.tails.get(key);
    const result = before ? before.then(work) : work();
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }
}
