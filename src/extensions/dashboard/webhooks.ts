import type { Logger } from "pino";
import type { Metrics } from "../../gateway/metrics.js";
import { type OutboundPolicy, OutboundUrlRefused } from "../../http/outbound.js";
import type { FeedItem } from "./feed.js";

export type WebhookKind = "slack" | "discord";

export interface WebhookTarget {
  kind: WebhookKind;
  url: string;
  /** `kind:host` — what logs, metrics and the dashboard show (a webhook URL's path is its secret). */
  label: string;
}

export interface WebhookOptions {
  /** Lines are collected this long before a post, so a burst becomes one message. Default 2000 ms. */
  batchMs?: number;
  /** At most one post per target per interval (Slack allows about one a second). Default 1000 ms. */
  minIntervalMs?: number;
  /** Attempts per batch before it is dropped. Default 5. */
  maxAttempts?: number;
  /** First retry delay; doubles each attempt, at most 60 s, unless the receiver says Retry-After. Default 1000 ms. */
  backoffMs?: number;
  /** Lines waiting per target, at most; the oldest are dropped beyond. Default 1000. */
  maxQueue?: number;
  /** Per POST. Default 10 s. */
  timeoutMs?: number;
}

export interface WebhookStatus {
  target: string;
  kind: WebhookKind;
  /** Successful posts. */
  posts: number;
  /** Summaries delivered in them. */
  lines: number;
  /** Failed attempts (each retry counts). */
  failures: number;
  /** Summaries given up on (attempts exhausted, refused, or queue overflow). */
  dropped: number;
  queued: number;
  lastError?: string;
  lastErrorAt?: string;
  lastSuccessAt?: string;
}

/** Characters per post: Discord refuses more than 2000; Slack truncates long texts, so stay readable. */
const MAX_CHARS: Record<WebhookKind, number> = { slack: 3500, discord: 1900 };
const MAX_BACKOFF_MS = 60_000;

/**
 * `slack:URL` or `discord:URL` says the format; a bare URL is recognised by host (hooks.slack.com,
 * discord.com/api/webhooks/…); any other bare URL gets Slack's `{"text": …}`, which most
 * Slack-compatible receivers (Mattermost, Rocket.Chat, …) accept. Errors never echo the URL's path.
 */
export function parseWebhookTarget(spec: string): WebhookTarget {
  const prefixed = /^(slack|discord):(https?:\/\/.*)$/i.exec(spec.trim());
  const raw = prefixed ? (prefixed[2] as string) : spec.trim();
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new TypeError(
      `summary webhook "${raw.slice(0, 12)}…" is not a URL (expected https://… or slack:/discord: + URL)`,
    );
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new TypeError(`summary webhook on ${url.protocol} is not http(s)`);
  }
  const host = url.hostname.toLowerCase();
  const detected: WebhookKind =
    /(^|\.)discord(app)?\.com$/.test(host) && url.pathname.startsWith("/api/webhooks/") ? "discord" : "slack";
  const kind = (prefixed?.[1]?.toLowerCase() as WebhookKind | undefined) ?? detected;
  return { kind, url: url.toString(), label: `${kind}:${url.host}` };
}

function escapeSlack(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function escapeDiscord(text: string): string {
  return text.replace(/([\\*_~`|>#[\]()-])/g, "\\$1");
}

/** One summary as a chat line, in the target's markup; the agent's own words quoted and attributed. */
export function chatLine(kind: WebhookKind, item: FeedItem): string {
  const markup = kind === "slack" ? escapeSlack : escapeDiscord;
  const bold = kind === "slack" ? "*" : "**";
  const who = markup(`${item.from.agent} → ${item.to.agent}`);
  const summary =
    item.summaryBy === "sender" ? `"${item.summary}" (in ${item.from.agent}'s words)` : item.summary;
  const line = `${bold}${who}${bold} (${markup(item.type)}): ${markup(summary)}`;
  return line.length > MAX_CHARS[kind] ? `${line.slice(0, MAX_CHARS[kind] - 1)}…` : line;
}

class TargetQueue {
  readonly lines: string[] = [];
  timer: NodeJS.Timeout | undefined;
  posting = false;
  attempt = 0;
  nextAllowedAt = 0;
  status: WebhookStatus;

  constructor(readonly target: WebhookTarget) {
    this.status = {
      target: target.label,
      kind: target.kind,
      posts: 0,
      lines: 0,
      failures: 0,
      dropped: 0,
      queued: 0,
    };
  }
}

class PostError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

/**
 * Posts every relayed message's summary to Slack- or Discord-compatible incoming webhooks, batched,
 * rate-limited and retried with backoff, entirely off the relay path: `push` only queues a line.
 * Outcomes are counted in the gateway's /metrics and shown on the dashboard. Posts go through the
 * gateway's outbound URL policy: a webhook on an address it refuses, or answering with a redirect
 * (never followed), is a failure that is not retried.
 */
export class SummaryWebhooks {
  private readonly queues: TargetQueue[];
  private readonly options: Required<WebhookOptions>;
  private closed = false;

  constructor(
    targets: WebhookTarget[],
    private readonly outbound: OutboundPolicy,
    private readonly metrics: Metrics,
    private readonly logger: Logger,
    options: WebhookOptions = {},
  ) {
    this.queues = targets.map((target) => new TargetQueue(target));
    this.options = {
      batchMs: options.batchMs ?? 2000,
      minIntervalMs: options.minIntervalMs ?? 1000,
      maxAttempts: options.maxAttempts ?? 5,
      backoffMs: options.backoffMs ?? 1000,
      maxQueue: options.maxQueue ?? 1000,
      timeoutMs: options.timeoutMs ?? 10_000,
    };
    metrics.describe("acp_summary_webhook_posts_total", "Summary batches posted to chat webhooks");
    metrics.describe(
      "acp_summary_webhook_failures_total",
      "Failed attempts to post summaries to chat webhooks",
    );
    metrics.describe(
      "acp_summary_webhook_dropped_total",
      "Summaries given up on (refused, retries exhausted, queue full)",
    );
    metrics.addCollector(() => [
      {
        name: "acp_summary_webhook_queued",
        help: "Summaries waiting to be posted, per webhook",
        type: "gauge",
        samples: this.queues.map((q) => ({ labels: { target: q.target.label }, value: q.lines.length })),
      },
    ]);
  }

  get size(): number {
    return this.queues.length;
  }

  /** Refuses a webhook whose address the outbound URL policy refuses as written (a names one is checked at each post). */
  checkTargets(): void {
    for (const { target } of this.queues) {
      try {
        this.outbound.parse(target.url);
      } catch (err) {
        throw new TypeError(`summary webhook ${target.label}: ${(err as OutboundUrlRefused).reason}`);
      }
    }
  }

  push(item: FeedItem): void {
    if (this.closed) return;
    for (const queue of this.queues) {
      queue.lines.push(chatLine(queue.target.kind, item));
      const overflow = queue.lines.length - this.options.maxQueue;
      if (overflow > 0) {
        queue.lines.splice(0, overflow);
        this.dropped(queue, overflow, "queue full");
      }
      this.schedule(queue, this.options.batchMs);
    }
  }

  status(): WebhookStatus[] {
    return this.queues.map((q) => ({ ...q.status, queued: q.lines.length }));
  }

  /** Stops scheduling; what is still queued gets one last attempt, bounded by `graceMs`. */
  async close(graceMs = 2000): Promise<void> {
    this.closed = true;
    for (const queue of this.queues) clearTimeout(queue.timer);
    await Promise.all(
      this.queues
        .filter((queue) => queue.lines.length > 0 && !queue.posting)
        .map(async (queue) => {
          const batch = this.takeBatch(queue);
          await this.postBatch(queue, batch, Math.min(graceMs, this.options.timeoutMs)).catch(() =>
            this.dropped(queue, batch.length, "the gateway stopped"),
          );
          this.dropped(queue, queue.lines.splice(0).length, "the gateway stopped");
        }),
    );
  }

  private schedule(queue: TargetQueue, delayMs: number): void {
    if (queue.timer || queue.posting || this.closed || queue.lines.length === 0) return;
    const wait = Math.max(delayMs, queue.nextAllowedAt - Date.now(), 0);
    queue.timer = setTimeout(() => {
      queue.timer = undefined;
      void this.flush(queue);
    }, wait);
    queue.timer.unref();
  }

  private async flush(queue: TargetQueue): Promise<void> {
    if (queue.lines.length === 0 || queue.posting) return;
    queue.posting = true;
    // Taken out while in flight, so lines pushed (or dropped for overflow) meanwhile cannot mix with it.
    const batch = this.takeBatch(queue);
    let delay = 0;
    try {
      await this.postBatch(queue, batch, this.options.timeoutMs);
      queue.attempt = 0;
    } catch (err) {
      const failure = err as PostError;
      queue.attempt++;
      if (!failure.retryable || queue.attempt >= this.options.maxAttempts) {
        this.dropped(queue, batch.length, failure.message);
        queue.attempt = 0;
      } else {
        queue.lines.unshift(...batch);
        delay =
          failure.retryAfterMs ?? Math.min(MAX_BACKOFF_MS, this.options.backoffMs * 2 ** (queue.attempt - 1));
      }
    } finally {
      queue.posting = false;
    }
    this.schedule(queue, delay);
  }

  /** The oldest lines that fit one post. */
  private takeBatch(queue: TargetQueue): string[] {
    const limit = MAX_CHARS[queue.target.kind];
    let count = 0;
    let length = 0;
    for (const line of queue.lines) {
      if (count > 0 && length + 1 + line.length > limit) break;
      count++;
      length += line.length + 1;
    }
    return queue.lines.splice(0, count);
  }

  private async postBatch(queue: TargetQueue, batch: string[], timeoutMs: number): Promise<void> {
    const text = batch.join("\n");
    const body =
      queue.target.kind === "discord" ? { content: text, allowed_mentions: { parse: [] } } : { text };
    queue.nextAllowedAt = Date.now() + this.options.minIntervalMs;
    try {
      const response = await this.outbound.fetch(queue.target.url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
        maxResponseBytes: 64 * 1024,
      });
      await response.text().catch(() => "");
      if (!response.ok) {
        const retryAfter = Number(response.headers.get("retry-after"));
        throw new PostError(
          `HTTP ${response.status}`,
          response.status === 429 || response.status >= 500,
          Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : undefined,
        );
      }
    } catch (err) {
      const failure =
        err instanceof PostError
          ? err
          : err instanceof OutboundUrlRefused
            ? new PostError(err.reason, false)
            : new PostError(describeNetworkError(err), true);
      queue.status.failures++;
      queue.status.lastError = failure.message;
      queue.status.lastErrorAt = new Date().toISOString();
      this.metrics.count("acp_summary_webhook_failures_total", { target: queue.target.label });
      this.logger.warn({ target: queue.target.label, error: failure.message }, "summary webhook post failed");
      throw failure;
    }
    queue.status.posts++;
    queue.status.lines += batch.length;
    queue.status.lastSuccessAt = new Date().toISOString();
    this.metrics.count("acp_summary_webhook_posts_total", { target: queue.target.label });
  }

  private dropped(queue: TargetQueue, count: number, why: string): void {
    if (count <= 0) return;
    queue.status.dropped += count;
    this.metrics.count("acp_summary_webhook_dropped_total", { target: queue.target.label }, count);
    this.logger.warn({ target: queue.target.label, count, why }, "summaries dropped");
  }
}

function describeNetworkError(err: unknown): string {
  const error = err as { name?: string; message?: string; code?: string; cause?: { code?: string } };
  if (error.name === "TimeoutError" || error.cause?.code === "ABORT_ERR") return "timed out";
  return error.code ?? error.cause?.code ?? error.message ?? String(err);
}
