/**
 * The A2A task records and push notification configs of published agents, kept in the broker's KV
 * (buckets `a2a-inbound-tasks` and `a2a-inbound-push`) instead of the SDK's in-memory stores: a
 * restarted gateway, or a second gateway on the same NATS, still answers GetTask, CancelTask,
 * SubscribeToTask and the push config methods for them, and still pushes their later events.
 * Scoping is the SDK's: tenant, then owner (the calling client), then task id; a client never sees
 * another's tasks. Values are the A2A 1.0 JSON of the SDK's objects.
 */
import { randomUUID } from "node:crypto";
import { Task, TaskPushNotificationConfig, type TaskState } from "@a2a-js/sdk";
import {
  InMemoryTaskStore,
  type PushNotificationStore,
  ServerCallContext,
  type StoredPushNotificationConfig,
  type TaskStore,
  type User,
} from "@a2a-js/sdk/server";
// The error classes from their own module: the broker index would load both broker drivers.
import { BrokerError, isWriteConflict } from "../../../broker/errors.js";
import type { Broker, KvBucket, KvEntry } from "../../../broker/index.js";
import { isTerminal } from "./executor.js";
import type { SealedSecret, SecretBox, SecretKeeper } from "../../../gateway/secrets.js";
import { WatchedReads } from "../../../broker/watched-reads.js";

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
  /** The config as A2A JSON; with `sealed`, its token and credentials are blanked here. */
  config: unknown;
  wireVersion: string;
  /** The config's secrets, sealed with the gateway's key (configs saved before had none). */
  sealed?: { token?: SealedSecret; credentials?: SealedSecret };
}

/** Binds a sealed push secret to its config's key and field, so it cannot be moved to another. */
const pushLabel = (key: string, field: "token" | "credentials") => `acp-a2a-push:v1:${key}:${field}`;

/**
 * The authenticated A2A caller, as the SDK's owner scoping sees it: `agent:<agent id>` for an API
 * key, `admin` for the admin token. The two never meet (an agent id has no `:`), so an agent named
 * `admin` neither sees the admin's tasks nor signs with its bridge identity.
 */
export class A2ACaller implements User {
  constructor(readonly userName: string) {}

  static of(
    caller: { kind: "admin" } | { kind: "agent"; agent: { record: { agentId: string } } },
  ): A2ACaller {
    return new A2ACaller(caller.kind === "admin" ? "admin" : `agent:${caller.agent.record.agentId}`);
  }
  get isAuthenticated(): boolean {
    return true;
  }
}

/** The call context of a stored task's owner, for work done outside any request (a late answer). */
export function ownerContext(stored: Pick<StoredTask, "tenant" | "owner">): ServerCallContext {
  return new ServerCallContext({
    user: new A2ACaller(stored.owner),
    ...(stored.tenant !== "" && { tenant: stored.tenant }),
  });
}

/** The SDK's owner resolution (resolveUserScope). */
const ownerOf = (context: ServerCallContext) => context.user?.userName || "unknown";

/** KV keys allow `[A-Za-z0-9_=/.-]`: every part is base64url, prefixed so none is empty. */
const part = (text: string) => `_${Buffer.from(text).toString("base64url")}`;
const scopeKey = (agentId: string, context: ServerCallContext) =>
  `${part(agentId)}/${part(context.tenant ?? "")}/${part(ownerOf(context))}`;

/** A task record as this gateway last read or wrote it, its task as JSON text (nobody can change it in place). */
interface CachedTask {
  revision: number;
  taskJson: string;
  origin: string;
  /** Its state when that is final (COMPLETED, FAILED, CANCELED, REJECTED). */
  finalState: TaskState | undefined;
}

function cachedOf(entry: KvEntry<StoredTask> | null, task?: Task): CachedTask | null {
  if (!entry) return null;
  const parsed = task ?? Task.fromJSON(entry.value.task as Task);
  return {
    revision: entry.revision,
    taskJson: JSON.stringify(entry.value.task),
    origin: entry.value.origin,
    finalState: isTerminal(parsed) ? parsed.status?.state : undefined,
  };
}

/** How many task records (and push config lists) a gateway keeps in memory. */
const CACHED_RECORDS = 10_000;
/** Compare-and-set attempts of one save before it gives up (each lost one re-reads the record). */
const SAVE_ATTEMPTS = 5;

/** The task bucket, with its reads cached, shared by every published agent's store. */
export class TaskRecords {
  readonly bucket: KvBucket<StoredTask>;
  readonly #reads: WatchedReads<CachedTask | null>;

  constructor(broker: Broker) {
    this.bucket = broker.kv<StoredTask>(TASK_BUCKET);
    this.#reads = new WatchedReads<CachedTask | null>(this.bucket, {
      max: CACHED_RECORDS,
      includes: (cached, revision) => cached !== null && cached.revision >= revision,
    });
  }

  read(key: string): Promise<CachedTask | null> {
    return this.#reads.read(key, async () => cachedOf(await this.bucket.get(key)));
  }

  /** Writes `value` (of `task`) if the record is still `previous` (none: still absent); false if it changed. */
  async write(key: string, task: Task, value: StoredTask, previous: CachedTask | null): Promise<boolean> {
    try {
      const revision = previous
        ? await this.bucket.update(key, value, previous.revision)
        : await this.bucket.create(key, value);
      this.#reads.remember(key, cachedOf({ key, value, revision }, task));
      return true;
    } catch (err) {
      if (!isWriteConflict(err)) throw err;
      this.#reads.forget(key);
      return false;
    }
  }

  /** `key` has no record yet (a task the SDK just made): its first load needs no read. */
  rememberAbsent(key: string): void {
    this.#reads.remember(key, null);
  }

  close(): void {
    this.#reads.close();
  }
}

export class KvTaskStore implements TaskStore {
  constructor(
    private readonly records: TaskRecords,
    private readonly agentId: string,
    private readonly origin: () => Promise<string>,
  ) {}

  private keyOf(taskId: string, context: ServerCallContext): string {
    return `${scopeKey(this.agentId, context)}/${part(taskId)}`;
  }

  /**
   * The SDK just made this task (a message without a task id gets a new random one), so nothing is
   * stored under it yet. Should something be, the first save's compare-and-set finds it and re-reads.
   */
  isNew(taskId: string, context: ServerCallContext): void {
    this.records.rememberAbsent(this.keyOf(taskId, context));
  }

  async save(task: Task, context: ServerCallContext): Promise<void> {
    const key = this.keyOf(task.id, context);
    for (let attempt = 1; ; attempt += 1) {
      const previous = await this.records.read(key);
      // A final state is final: a late answer (or another gateway) never overwrites a cancel.
      if (previous?.finalState !== undefined && previous.finalState !== task.status?.state) return;
      const value: StoredTask = {
        agentId: this.agentId,
        tenant: context.tenant ?? "",
        owner: ownerOf(context),
        origin: previous?.origin ?? (await this.origin()),
        task: Task.toJSON(task),
        savedAt: new Date().toISOString(),
      };
      if (await this.records.write(key, task, value, previous)) return;
      if (attempt === SAVE_ATTEMPTS) {
        throw new BrokerError("conflict", `A2A task ${task.id} kept changing while it was saved`, {
          field: "taskId",
        });
      }
    }
  }

  async load(taskId: string, context: ServerCallContext): Promise<Task | undefined> {
    const cached = await this.records.read(this.keyOf(taskId, context));
    return cached ? Task.fromJSON(JSON.parse(cached.taskJson) as Task) : undefined;
  }

  /** The SDK's own filtering and paging, over the caller's stored tasks. */
  async list(...[params, context]: Parameters<TaskStore["list"]>): ReturnType<TaskStore["list"]> {
    const page = new InMemoryTaskStore();
    const prefix = `${scopeKey(this.agentId, context)}/`;
    const { bucket } = this.records;
    for (const key of await bucket.keys(prefix)) {
      const entry = await bucket.get(key);
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
  const tasks = broker.kv<StoredTask>(TASK_BUCKET);
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

/**
 * The push config bucket, with each task's list of configs cached, shared by every published agent.
 * A config's token and authentication credentials are secrets the gateway presents to the client's
 * webhook: with a secret keeper they are sealed at rest, like every other secret the gateway keeps.
 */
export class PushConfigs {
  readonly bucket: KvBucket<StoredPush>;
  /** Per task (key prefix `…/<task>/`): its stored configs as JSON text. */
  readonly lists: WatchedReads<string>;
  #box: Promise<SecretBox> | undefined;

  constructor(
    private readonly broker: Broker,
    private readonly secrets?: SecretKeeper,
  ) {
    this.bucket = broker.kv<StoredPush>(PUSH_BUCKET);
    this.lists = new WatchedReads<string>(this.bucket, {
      max: CACHED_RECORDS,
      entryOf: (key) => key.slice(0, key.lastIndexOf("/") + 1),
    });
  }

  /** The stored form of `config` under `key`: its secrets sealed when there is a keeper. */
  async seal(key: string, config: TaskPushNotificationConfig, wireVersion: string): Promise<StoredPush> {
    const json = TaskPushNotificationConfig.toJSON(config) as {
      token?: string;
      authentication?: { credentials?: string };
    };
    if (!this.secrets || (!json.token && !json.authentication?.credentials))
      return { config: json, wireVersion };
    const box = await this.#openBox();
    const sealed: NonNullable<StoredPush["sealed"]> = {};
    if (json.token) {
      sealed.token = await box.seal(json.token, pushLabel(key, "token"));
      json.token = "";
    }
    if (json.authentication?.credentials) {
      sealed.credentials = await box.seal(json.authentication.credentials, pushLabel(key, "credentials"));
      json.authentication.credentials = "";
    }
    return { config: json, wireVersion, sealed };
  }

  /** The config as the SDK sees it, its secrets opened (changes `stored`: pass a fresh copy). */
  async open(key: string, stored: StoredPush): Promise<TaskPushNotificationConfig> {
    // Each load parses the cached text anew, so `stored` is this call's own copy.
    const json = stored.config as {
      token?: string;
      authentication?: { credentials?: string };
    };
    if (stored.sealed) {
      const box = await this.#openBox();
      if (stored.sealed.token) json.token = await box.open(stored.sealed.token, pushLabel(key, "token"));
      if (stored.sealed.credentials && json.authentication) {
        json.authentication.credentials = await box.open(
          stored.sealed.credentials,
          pushLabel(key, "credentials"),
        );
      }
    }
    return TaskPushNotificationConfig.fromJSON(json);
  }

  close(): void {
    this.lists.close();
  }

  #openBox(): Promise<SecretBox> {
    if (!this.secrets)
      return Promise.reject(
        new Error("A2A push config secrets are sealed, and this gateway has no secret keeper"),
      );
    this.#box ??= this.secrets.open(this.broker);
    return this.#box;
  }
}

export class KvPushNotificationStore implements PushNotificationStore {
  constructor(
    private readonly pushes: PushConfigs,
    private readonly agentId: string,
  ) {}

  private prefix(taskId: string, context: ServerCallContext): string {
    return `${scopeKey(this.agentId, context)}/${part(taskId)}/`;
  }

  async save(taskId: string, context: ServerCallContext, config: TaskPushNotificationConfig): Promise<void> {
    // The SDK reads the assigned id back from the object it passed (PushNotificationStore's contract).
    if (!config.id) config.id = randomUUID();
    const prefix = this.prefix(taskId, context);
    const key = `${prefix}${part(config.id)}`;
    await this.pushes.bucket.put(key, await this.pushes.seal(key, config, context.requestedVersion || "0.3"));
    this.pushes.lists.forget(prefix);
  }

  async load(taskId: string, context: ServerCallContext): Promise<TaskPushNotificationConfig[]> {
    return (await this.loadWithMetadata(taskId, context)).map((stored) => stored.config);
  }

  /** Asked at every event of every task (to push it): usually an empty list, from memory. */
  async loadWithMetadata(
    taskId: string,
    context: ServerCallContext,
  ): Promise<StoredPushNotificationConfig[]> {
    const prefix = this.prefix(taskId, context);
    const { bucket, lists } = this.pushes;
    const json = await lists.read(prefix, async () => {
      const stored: [string, StoredPush][] = [];
      for (const key of await bucket.keys(prefix)) {
        const entry = await bucket.get(key);
        if (entry) stored.push([key, entry.value]);
      }
      return JSON.stringify(stored);
    });
    const stored = JSON.parse(json) as [string, StoredPush][];
    return Promise.all(
      stored.map(async ([key, push]) => ({
        config: await this.pushes.open(key, push),
        wireVersion: push.wireVersion,
      })),
    );
  }

  async delete(taskId: string, context: ServerCallContext, configId = taskId): Promise<void> {
    const prefix = this.prefix(taskId, context);
    await this.pushes.bucket.delete(`${prefix}${part(configId)}`);
    this.pushes.lists.forget(prefix);
  }
}
