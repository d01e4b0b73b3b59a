/**
 * The sending side of a fault test: a stream of signed notifications POSTed to the gateway with a
 * fixed number in flight. What counts is the gateway's answer: a 202 is a promise to deliver.
 * Like a careful real client, a message whose answer never came (connection reset, gateway down)
 * or came as 503/429 is resubmitted with the *same signed bytes*: the gateway deduplicates by
 * message-id, so this can never cause a second delivery — the tests check that too.
 */
import { randomUUID } from "node:crypto";
import { buildNotification, signMessage } from "../../../src/protocol/index.js";
import type { TestAgent } from "../../helpers/gateway.js";
import { sleep } from "./processes.js";

export interface StreamOptions {
  /** Base URL(s); the n-th message goes to urls[n % length] (one URL behind a proxy is common). */
  urls: string[];
  from: TestAgent;
  to: string;
  count: number;
  concurrency: number;
  /** The whole stream gives up after this long, whatever is left (bounded in time, not only count). */
  deadlineMs: number;
  /** Resubmit after a 5xx or 429 (default true). False: such an answer is final, like a 4xx. */
  resubmit?: boolean;
}

const RETRY_DELAY_MS = 100;

function bump<K>(map: Map<K, number>, key: K): void {
  map.set(key, (map.get(key) ?? 0) + 1);
}

export class MessageStream {
  /** Distinct messages submitted at least once. */
  sent = 0;
  readonly acknowledged = new Set<string>();
  /** Messages whose final answer was an error (4xx, or 5xx without `resubmit`). */
  readonly refused = new Set<string>();
  /** Resubmissions the gateway answered 202 `duplicate: true` (the first answer was lost). */
  duplicatesReported = 0;
  /** Every answer by HTTP status (202 included); failed connections under "network". */
  readonly answers = new Map<string, number>();
  /** Every JSON-RPC error code received, with how often. */
  readonly errorCodes = new Map<number, number>();
  /** The first error body of each final error status, for failure messages. */
  readonly refusals = new Map<number, string>();
  /** When each 202 arrived (ms since epoch), in order. */
  private readonly acknowledgedAt: number[] = [];
  private next = 0;
  private readonly started = Date.now();

  constructor(private readonly options: StreamOptions) {}

  /** Runs to the end: every message answered for good, or the deadline passed. */
  async run(): Promise<void> {
    await Promise.all(Array.from({ length: this.options.concurrency }, () => this.worker()));
  }

  /** Resolves once `n` messages were acknowledged (or every message was sent, or `timeoutMs`). */
  async acknowledgedAtLeast(n: number, timeoutMs = 120_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (this.acknowledged.size < n && this.next < this.options.count && Date.now() < until)
      await sleep(20);
  }

  /**
   * The longest wait between two consecutive 202s from `since` on (the first counted from `since`):
   * how long a fault stopped the stream, as the sender saw it.
   */
  longestPauseAfter(since: number): number {
    let longest = 0;
    let previous = since;
    for (const at of this.acknowledgedAt) {
      if (at < since) continue;
      longest = Math.max(longest, at - previous);
      previous = at;
    }
    return longest;
  }

  /** Acknowledged messages per second from the start to the last 202, faults included. */
  get ratePerSecond(): number {
    const seconds = ((this.acknowledgedAt.at(-1) ?? Date.now()) - this.started) / 1000;
    return Math.round(this.acknowledged.size / Math.max(seconds, 0.001));
  }

  /** `202:9990,network:12,503:40`, for the report. */
  describeAnswers(): string {
    return [...this.answers.entries()].map(([k, v]) => `${k}:${v}`).join(",");
  }

  private async worker(): Promise<void> {
    const { from, to, count, deadlineMs, urls } = this.options;
    const deadline = this.started + deadlineMs;
    while (this.next < count && Date.now() < deadline) {
      const n = this.next++;
      this.sent++;
      const messageId = randomUUID();
      const message = signMessage(buildNotification(from.sender, to, { n }, { messageId }), from.signer);
      await this.submitOne(urls[n % urls.length] as string, messageId, JSON.stringify(message), deadline);
    }
  }

  /** Submits until a final answer (202, a refusal) or the deadline. */
  private async submitOne(url: string, id: string, body: string, deadline: number): Promise<void> {
    while (Date.now() < deadline) {
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
        bump(this.answers, "network");
        await sleep(RETRY_DELAY_MS);
        continue;
      }
      bump(this.answers, String(status));
      if (status === 202) {
        const answer = JSON.parse(text) as { id: string; duplicate: boolean };
        this.acknowledged.add(answer.id);
        this.acknowledgedAt.push(Date.now());
        if (answer.duplicate) this.duplicatesReported++;
        return;
      }
      const code = (JSON.parse(text) as { error?: { code?: number } }).error?.code;
      if (typeof code === "number") bump(this.errorCodes, code);
      if ((status >= 500 || status === 429) && this.options.resubmit !== false) {
        await sleep(RETRY_DELAY_MS);
        continue;
      }
      this.refused.add(id);
      if (!this.refusals.has(status)) this.refusals.set(status, text.slice(0, 500));
      return;
    }
  }
}
