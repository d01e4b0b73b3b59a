/**
 * The sending side of a fault test: a stream of signed notifications POSTed to the gateway with a
 * fixed number in flight. What counts is the gateway's answer: a 202 is a promise to deliver.
 * Like a careful real client, a message whose answer never came (connection reset, gateway down)
 * or came as 503 is resubmitted with the *same signed bytes*: the gateway deduplicates by
 * message-id, so this can never cause a second delivery — the test checks that too.
 */
import { buildNotification, signMessage } from "../../../src/protocol/index.js";
import type { TestAgent } from "../../helpers/gateway.js";
import { sleep } from "./processes.js";

export interface StreamOptions {
  /** Base URL(s); the n-th message goes to url[n % length] (one URL behind a proxy is common). */
  urls: string[];
  from: TestAgent;
  to: string;
  count: number;
  concurrency: number;
  /** The whole stream gives up after this long, whatever is left (bounded in time, not only count). */
  deadlineMs: number;
  /** Pause between resubmissions of one message. */
  retryDelayMs?: number;
}

export class MessageStream {
  /** Distinct messages submitted at least once. */
  sent = 0;
  readonly acknowledged = new Set<string>();
  /** Messages the gateway answered 202 `duplicate: true` on a resubmission (first answer was lost). */
  duplicatesReported = 0;
  /** Answers by HTTP status (202 included), and network failures under "network". */
  readonly answers = new Map<string, number>();
  /** The first error body of each refused (4xx) status, for the failure message. */
  readonly refusals = new Map<number, string>();
  private next = 0;
  private readonly started = Date.now();

  constructor(private readonly options: StreamOptions) {}

  /** Runs to the end (every message answered 202 or refused, or the deadline passed). */
  async run(): Promise<void> {
    const workers = Array.from({ length: this.options.concurrency }, () => this.worker());
    await Promise.all(workers);
  }

  /** Resolves once `n` messages were acknowledged (or the stream ended). */
  async acknowledgedAtLeast(n: number, timeoutMs = 120_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (this.acknowledged.size < n && this.next < this.options.count && Date.now() < until) await sleep(20);
  }

  get finishedAll(): boolean {
    return this.acknowledged.size + this.refusedCount === this.options.count;
  }

  get refusedCount(): number {
    let refused = 0;
    for (const [status, n] of this.answers) if (/^4\d\d$/.test(status)) refused += n;
    return refused;
  }

  private count(what: string): void {
    this.answers.set(what, (this.answers.get(what) ?? 0) + 1);
  }

  private async worker(): Promise<void> {
    const { from, to, count, deadlineMs, urls } = this.options;
    const deadline = this.started + deadlineMs;
    while (this.next < count && Date.now() < deadline) {
      const n = this.next++;
      this.sent++;
      const body = JSON.stringify(signMessage(buildNotification(from.sender, to, { n }), from.signer));
      await this.deliverOne(urls[n % urls.length] as string, body, deadline);
    }
  }

  /** Submits until a 202 or a 4xx answer, or the deadline. */
  private async deliverOne(url: string, body: string, deadline: number): Promise<void> {
    for (let attempt = 0; Date.now() < deadline; attempt++) {
      let status: number;
      let text: string;
      try {
        const res = await fetch(`${url}/api/v1/messages`, {
          method: "POST",
          headers: { "x-api-key": this.options.from.apiKey, "content-type": "application/json" },
          body,
          signal: AbortSignal.timeout(15_000),
        });
        status = res.status;
        text = await res.text();
      } catch {
        this.count("network");
        await sleep(this.options.retryDelayMs ?? 100);
        continue;
      }
      this.count(String(status));
      if (status === 202) {
        const answer = JSON.parse(text) as { id: string; duplicate: boolean };
        this.acknowledged.add(answer.id);
        if (answer.duplicate) this.duplicatesReported++;
        return;
      }
      if (status >= 500 || status === 429) {
        await sleep(this.options.retryDelayMs ?? 100);
        continue;
      }
      if (!this.refusals.has(status)) this.refusals.set(status, text.slice(0, 500));
      return;
    }
  }

  /** Acknowledged messages per second over the run, for the report. */
  get ratePerSecond(): number {
    const seconds = (Date.now() - this.started) / 1000;
    return Math.round(this.acknowledged.size / Math.max(seconds, 0.001));
  }

  /** `{network: 12, 202: 9990, 503: 40}` as a compact string for the report. */
  describeAnswers(): string {
    return [...this.answers.entries()].map(([k, v]) => `${k}:${v}`).join(",");
  }
}
