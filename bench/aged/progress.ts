/** One progress line every few seconds for long work: count, share, rate, time left. */
export class Progress {
  private readonly started = performance.now();
  private lastPrinted = performance.now();

  constructor(
    private readonly what: string,
    private readonly total: number,
    private readonly everyMs = 5000,
  ) {}

  tick(done: number): void {
    const now = performance.now();
    if (now - this.lastPrinted < this.everyMs) return;
    this.lastPrinted = now;
    const seconds = (now - this.started) / 1000;
    const rate = done / seconds;
    const left = rate > 0 ? (this.total - done) / rate : Number.NaN;
    console.log(
      `  ${this.what}: ${done.toLocaleString("en-US")} / ${this.total.toLocaleString("en-US")} ` +
        `(${((done / this.total) * 100).toFixed(0)}%), ${Math.round(rate).toLocaleString("en-US")}/s, ` +
        `about ${formatDuration(left)} left`,
    );
  }

  done(count: number): void {
    const seconds = (performance.now() - this.started) / 1000;
    console.log(
      `  ${this.what}: ${count.toLocaleString("en-US")} in ${formatDuration(seconds)} ` +
        `(${Math.round(count / seconds).toLocaleString("en-US")}/s)`,
    );
  }
}

export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return "?";
  if (seconds < 90) return `${seconds.toFixed(0)} s`;
  const minutes = Math.floor(seconds / 60);
  return minutes < 90 ? `${minutes} min ${Math.round(seconds % 60)} s` : `${(minutes / 60).toFixed(1)} h`;
}
