/**
 * The A2A task records and push notification configs of published agents, kept in the broker's KV
 * (buckets `a2a-inbound-tasks` and `a2a-inbound-push`) instead of the SDK's in-memory stores: a
 * restarted gateway, or a second gateway on the same NATS, still answers GetTask, CancelTask,
 * SubscribeToTask and the push config methods for them, and still pushes their later events.
 * Scoping is the SDK's: tenant, then owner (the calling client), then task id; a client never sees
 * another's tasks. Values are the A2A 1.0 JSON of the SDK's objects.
 */
import { randomUUID } from "node:crypto";
import { Task, TaskPushNotificationConfig } from "@a2a-js/sdk";
import {
  InMemoryTaskStore,
  type PushNotificationStore,
  ServerCallContext,
  type StoredPushNotificationConfig,
  type TaskStore,
  type User,
} from "@a2a-js/sdk/server";
import type { Broker, KvBucket } from "../../../broker/index.js";
import { isTerminal } from "./executor.js";

export const TASK_BUCKET = "a2a-inbound-tasks";
export const PUSH_BUCKET = "a2a-inbound-push";

/** A task as stored: who owns it, which agent it went to, and which bridge sent its request. */
export interface StoredTask {
  agentId: string;
  tenant: string;
  owner: string;
  /** The install id of the bridge whose agent sent the ACP request (only that bridge gets its answer). */
  origin: string;
  task: unknown;
  savedAt: string;
}

interface StoredPush {
  config: unknown;
  wireVersion: string;
}

/** The authenticated A2A caller, as the SDK's owner scoping sees it. */
export class A2aCaller implements User {
  constructor(readonly userName: string) {}
  get isAuthenticated(): boolean {
    return true;
  }
}

/** The call context of a stored task's owner, for work done outside any request (a late answer). */
export function ownerContext(stored: Pick<StoredTask, "tenant" | "owner">): ServerCallContext {
  return new ServerCallContext({
    user: new A2aCaller(stored.owner),
    ...(stored.tenant !== "" && { tenant: stored.tenant }),
  });
}

/** The SDK's owner resolution (resolveUserScope). */
const ownerOf = (context: ServerCallContext) => context.user?.userName || "unknown";

/** KV keys allow `[A-Za-z0-9_=/.-]`: every part is base64url, prefixed so none is empty. */
const part = (text: string) => `_${Buffer.from(text).toString("base64url")}`;
const scopeKey = (agentId: string, context: ServerCallContext) =>
  `${part(agentId)}/${part(context.tenant ?? "")}/${part(ownerOf(context))}`;

export class KvTaskStore implements TaskStore {
  constructor(
    private readonly bucket: KvBucket<StoredTask>,
    private readonly agentId: string,
    private readonly origin: () => Promise<string>,
  ) {}

  static bucket(broker: Broker): KvBucket<StoredTask> {
    return broker.kv<StoredTask>(TASK_BUCKET);
  }

  async save(task: Task, context: ServerCallContext): Promise<void> {
    const key = `${scopeKey(this.agentId, context)}/${part(task.id)}`;
    const previous = (await this.bucket.get(key))?.value;
    // A final state is final: a late answer (or another gateway) never overwrites a cancel.
    if (previous && isTerminal(Task.fromJSON(previous.task as Task))) {
      const before = Task.fromJSON(previous.task as Task).status?.state;
      if (before !== task.status?.state) return;
    }
    await this.bucket.put(key, {
      agentId: this.agentId,
      tenant: context.tenant ?? "",
      owner: ownerOf(context),
      origin: previous?.origin ?? (await this.origin()),
      task: Task.toJSON(task),
      savedAt: new Date().toISOString(),
    });
  }

  async load(taskId: string, context: ServerCallContext): Promise<Task | undefined> {
    const entry = await this.bucket.get(`${scopeKey(this.agentId, context)}/${part(taskId)}`);
    return entry ? Task.fromJSON(entry.value.task as Task) : undefined;
  }

  /** The SDK's own filtering and paging, over the caller's stored tasks. */
  async list(...[params, context]: Parameters<TaskStore["list"]>): ReturnType<TaskStore["list"]> {
    const page = new InMemoryTaskStore();
    const prefix = `${scopeKey(this.agentId, context)}/`;
    for (const key of await this.bucket.keys(prefix)) {
      const entry = await this.bucket.get(key);
      if (entry) await page.save(Task.fromJSON(entry.value.task as Task), context);
    }
    return page.list(params, context);
  }
}

/** How long a finished task's record (and its push configs) is kept: the broker's default retention. */
export const TASK_RETENTION_MS = 7 * 24 * 3600_000;

/**
 * Scans every stored task: deletes the finished ones last saved before `expireBefore`, with their
 * push configs, and returns the unfinished ones (across every published agent).
 */
export async function sweepTasks(broker: Broker, expireBefore: Date): Promise<StoredTask[]> {
  const tasks = KvTaskStore.bucket(broker);
  const pushes = broker.kv<StoredPush>(PUSH_BUCKET);
  const unfinished: StoredTask[] = [];
  for (const key of await tasks.keys()) {
    const stored = (await tasks.get(key))?.value;
    if (!stored) continue;
    if (!isTerminal(Task.fromJSON(stored.task as Task))) unfinished.push(stored);
    else if (new Date(stored.savedAt) < expireBefore) {
      for (const push of await pushes.keys(`${key}/`)) await pushes.delete(push);
      await tasks.delete(key);
    }
  }
  return unfinished;
}

export class KvPushNotificationStore implements PushNotificationStore {
  private readonly bucket: KvBucket<StoredPush>;

  constructor(
    broker: Broker,
    private readonly agentId: string,
  ) {
    this.bucket = broker.kv<StoredPush>(PUSH_BUCKET);
  }

  private prefix(taskId: string, context: ServerCallContext): string {
    return `${scopeKey(this.agentId, context)}/${part(taskId)}/`;
  }

  async save(taskId: string, context: ServerCallContext, config: TaskPushNotificationConfig): Promise<void> {
    // The SDK reads the assigned id back from the object it passed (PushNotificationStore's contract).
    if (!config.id) config.id = randomUUID();
    await this.bucket.put(`${this.prefix(taskId, context)}${part(config.id)}`, {
      config: TaskPushNotificationConfig.toJSON(config),
      wireVersion: context.requestedVersion || "0.3",
    });
  }

  async load(taskId: string, context: ServerCallContext): Promise<TaskPushNotificationConfig[]> {
    return (await this.loadWithMetadata(taskId, context)).map((stored) => stored.config);
  }

  async loadWithMetadata(
    taskId: string,
    context: ServerCallContext,
  ): Promise<StoredPushNotificationConfig[]> {
    const found: StoredPushNotificationConfig[] = [];
    for (const key of await this.bucket.keys(this.prefix(taskId, context))) {
      const entry = await this.bucket.get(key);
      if (!entry) continue;
      const config = TaskPushNotificationConfig.fromJSON(entry.value.config as TaskPushNotificationConfig);
      found.push({ config, wireVersion: entry.value.wireVersion });
    }
    return found;
  }

  async delete(taskId: string, context: ServerCallContext, configId = taskId): Promise<void> {
    await this.bucket.delete(`${this.prefix(taskId, context)}${part(configId)}`);
  }
}
