/** Polls `read` until `predicate` holds and returns that value; fails naming `what` and the last value. */
export async function until<T>(
  read: () => T | Promise<T>,
  predicate: (value: T) => boolean,
  what: string,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (predicate(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting until ${what}; last value ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
