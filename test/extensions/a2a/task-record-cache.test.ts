/**
 * The A2A task records and push configs are read from memory once this gateway has read or written
 * them, and stay correct when another gateway (a second cache on the same broker) changes them:
 * its changes drop our entries through the bucket's watch, and a save from a stale entry never
 * overwrites a final state (compare-and-set on the revision read). Both brokers, real stores. Push
 * configs' secrets are sealed at rest.
 */
import { join } from "node:path";
import { Task, TaskPushNotificationConfig, TaskState } from "@a2a-js/sdk";
import { ServerCallContext } from "@a2a-js/sdk/server";
import { describe, expect, it, onTestFinished } from "vitest";
import { type Broker, type KvBucket, openBroker } from "../../../src/broker/index.js";
import { WatchedReads } from "../../../src/broker/watched-reads.js";
import {
  A2ACaller,
  KvPushNotificationStore,
  KvTaskStore,
  PushConfigs,
  TASK_BUCKET,
  TaskRecords,
} from "../../../src/extensions/a2a/inbound/durable-stores.js";
import { secretKeeper } from "../../../src/extensions/custody/sealing.js";
import { describeWithNats, useNatsServer } from "../../helpers/nats.js";
import { useTmpDir } from "../../helpers/tmp.js";
import { until } from "../../helpers/until.js";

const tmp = useTmpDir("acp-a2a-cache-");
const context = new ServerCallContext({ user: new A2ACaller("alice") });

function task(state: TaskState): Task {
  return Task.fromJSON({
    id: "task-1",
    contextId: "ctx-1",
    status: { state: TaskState[state] },
    artifacts: [],
    history: [],
    metadata: { step: state },
  });
}

/** `broker` whose buckets count their `get` calls (reads that reach the broker). */
function countingReads(broker: Broker): { broker: Broker; gets: () => number } {
  let gets = 0;
  const counted = (bucket: KvBucket<unknown>) =>
    new Proxy(bucket, {
      get(target, property) {
        if (property === "get") {
          return (key: string) => {
            gets += 1;
            return target.get(key);
          };
        }
        const value = Reflect.get(target, property) as unknown;
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  const wrapped = new Proxy(broker, {
    get(target, property) {
      if (property === "kv") return (name: string) => counted(target.kv(name));
      const value = Reflect.get(target, property) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { broker: wrapped, gets: () => gets };
}

/** Two gateways' stores for one published agent: each with its own cache, one store underneath. */
function twoGateways(brokerOne: Broker, brokerTwo: Broker) {
  const made = [new TaskRecords(brokerOne), new TaskRecords(brokerTwo)] as const;
  const pushes = [new PushConfigs(brokerOne), new PushConfigs(brokerTwo)] as const;
  const origin = async () => "install-1";
  return {
    one: new KvTaskStore(made[0], "helper", origin),
    two: new KvTaskStore(made[1], "helper", origin),
    pushOne: new KvPushNotificationStore(pushes[0], "helper"),
    pushTwo: new KvPushNotificationStore(pushes[1], "helper"),
    close() {
      for (const closable of [...made, ...pushes]) closable.close();
    },
  };
}

function cacheSuite(open: () => Promise<[Broker, Broker]>) {
  it("serves a task's reloads from memory after it saved it", async () => {
    const [broker] = await open();
    const counting = countingReads(broker);
    const records = new TaskRecords(counting.broker);
    try {
      const store = new KvTaskStore(records, "helper", async () => "install-1");
      await store.save(task(TaskState.TASK_STATE_SUBMITTED), context);
      await store.save(task(TaskState.TASK_STATE_WORKING), context);
      const readsAfterSaves = counting.gets();
      for (let i = 0; i < 5; i++) {
        expect((await store.load("task-1", context))?.status?.state).toBe(TaskState.TASK_STATE_WORKING);
      }
      expect(counting.gets()).toBe(readsAfterSaves);
      // The first save read once (no record yet); the second used the record the first wrote.
      expect(readsAfterSaves).toBe(1);
    } finally {
      records.close();
    }
  });

  it("reads nothing for a task the SDK just made, and still never overwrites a stored final state", async () => {
    const [brokerOne, brokerTwo] = await open();
    const counting = countingReads(brokerOne);
    const records = new TaskRecords(counting.broker);
    const other = new TaskRecords(brokerTwo);
    try {
      const store = new KvTaskStore(records, "helper", async () => "install-1");
      await records.read("earlier-call"); // the cache follows the bucket from its first read on
      const before = counting.gets();
      store.isNew("task-1", context);
      expect(await store.load("task-1", context)).toBeUndefined();
      await store.save(task(TaskState.TASK_STATE_SUBMITTED), context);
      expect(counting.gets()).toBe(before);

      // Wrongly told "new" while another gateway has the task, final: the create is refused, re-read.
      const elsewhere = new KvTaskStore(other, "helper", async () => "install-2");
      const tenantTwo = new ServerCallContext({ user: new A2ACaller("alice"), tenant: "t2" });
      await elsewhere.save(task(TaskState.TASK_STATE_CANCELED), tenantTwo);
      store.isNew("task-1", tenantTwo);
      await store.save(task(TaskState.TASK_STATE_COMPLETED), tenantTwo);
      expect((await elsewhere.load("task-1", tenantTwo))?.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    } finally {
      records.close();
      other.close();
    }
  });

  it("sees another gateway's cancel, and never overwrites it from a stale entry", async () => {
    const [brokerOne, brokerTwo] = await open();
    const gateways = twoGateways(brokerOne, brokerTwo);
    try {
      await gateways.one.save(task(TaskState.TASK_STATE_WORKING), context);
      expect((await gateways.two.load("task-1", context))?.status?.state).toBe(TaskState.TASK_STATE_WORKING);
      await gateways.two.save(task(TaskState.TASK_STATE_CANCELED), context);
      // Gateway one answers at once, before or after the watch told it of the cancel.
      await gateways.one.save(task(TaskState.TASK_STATE_COMPLETED), context);
      const stored = await brokerOne.kv<{ task: unknown }>(TASK_BUCKET).keys();
      expect(stored).toHaveLength(1);
      const entry = await brokerOne.kv<{ task: Task }>(TASK_BUCKET).get(stored[0] as string);
      expect(Task.fromJSON(entry?.value.task).status?.state).toBe(TaskState.TASK_STATE_CANCELED);
      await until(
        async () => (await gateways.one.load("task-1", context))?.status?.state,
        (state) => state === TaskState.TASK_STATE_CANCELED,
        "gateway one's cache shows the cancel",
      );
    } finally {
      gateways.close();
    }
  });

  it("a write from an outdated revision is refused and the entry reread", async () => {
    const [brokerOne, brokerTwo] = await open();
    const one = new TaskRecords(brokerOne);
    const two = new TaskRecords(brokerTwo);
    try {
      const store = new KvTaskStore(one, "helper", async () => "install-1");
      await store.save(task(TaskState.TASK_STATE_WORKING), context);
      const [key] = await one.bucket.keys();
      const seen = await one.read(key as string);
      const current = await two.read(key as string);
      const working = task(TaskState.TASK_STATE_WORKING);
      const stored = (await two.bucket.get(key as string))!.value;
      expect(await two.write(key as string, working, stored, current)).toBe(true);
      expect(await one.write(key as string, working, stored, seen)).toBe(false);
      expect((await one.read(key as string))?.revision).toBeGreaterThan(seen?.revision ?? 0);
    } finally {
      one.close();
      two.close();
    }
  });

  it("push configs: another gateway's new config is seen; a deleted one is gone", async () => {
    const [brokerOne, brokerTwo] = await open();
    const gateways = twoGateways(brokerOne, brokerTwo);
    try {
      await gateways.one.save(task(TaskState.TASK_STATE_WORKING), context);
      expect(await gateways.pushOne.load("task-1", context)).toEqual([]);
      const config = TaskPushNotificationConfig.fromJSON({
        taskId: "task-1",
        id: "hook-1",
        url: "https://example.org/hook",
      });
      await gateways.pushTwo.save("task-1", context, config);
      await until(
        () => gateways.pushOne.load("task-1", context),
        (configs) => configs.length === 1,
        "gateway one sees the new push config",
      );
      expect((await gateways.pushOne.load("task-1", context))[0]?.url).toBe("https://example.org/hook");
      await gateways.pushOne.delete("task-1", context, "hook-1");
      expect(await gateways.pushOne.load("task-1", context)).toEqual([]);
      await until(
        () => gateways.pushTwo.load("task-1", context),
        (configs) => configs.length === 0,
        "gateway two sees the delete",
      );
    } finally {
      gateways.close();
    }
  });

  it("reads an entry again once it is older than maxAgeMs", async () => {
    const [broker] = await open();
    const bucket = broker.kv<string>("cache-age");
    await bucket.put("k", "v");
    let clock = 1_000_000;
    const reads = new WatchedReads<string | undefined>(bucket, {
      max: 10,
      maxAgeMs: 5_000,
      now: () => clock,
    });
    try {
      let loads = 0;
      const load = async () => {
        loads += 1;
        return (await bucket.get("k"))?.value;
      };
      await reads.read("k", load);
      clock += 5_000;
      await reads.read("k", load);
      expect(loads).toBe(1);
      clock += 1;
      await reads.read("k", load);
      expect(loads).toBe(2);
    } finally {
      reads.close();
    }
  });

  it("does not keep a read that a change overtook", async () => {
    const [broker] = await open();
    const bucket = broker.kv<string>("cache-probe");
    await bucket.put("k", "old");
    const reads = new WatchedReads<string | undefined>(bucket, { max: 10 });
    try {
      let loads = 0;
      const load = async () => {
        loads += 1;
        const value = (await bucket.get("k"))?.value;
        if (loads === 1) await bucket.put("k", "new"); // lands while the first read is in flight
        return value;
      };
      expect(await reads.read("k", load)).toBe("old");
      await until(
        () => reads.read("k", load),
        (value) => value === "new",
        "a read goes to the broker again",
        2_000,
      );
      expect(loads).toBeGreaterThanOrEqual(2);
      const settled = loads;
      expect(await reads.read("k", load)).toBe("new");
      expect(loads).toBe(settled);
    } finally {
      reads.close();
    }
  });
}

describe("A2A task record cache (embedded broker)", () => {
  cacheSuite(async () => {
    const broker = await openBroker({ data: join(tmp(), "data") });
    onTestFinished(() => broker.close());
    return [broker, broker];
  });
});

describeWithNats("A2A task record cache (NATS JetStream, two gateways)", () => {
  const startNats = useNatsServer();
  cacheSuite(async () => {
    const nats = await startNats();
    const one = await openBroker({ nats: { servers: nats.url } });
    const two = await openBroker({ nats: { servers: nats.url } });
    onTestFinished(async () => {
      await one.close();
      await two.close();
    });
    return [one, two];
  });
});

describe("A2A push configs at rest", () => {
  it("seals a config's token and credentials; opens them, and configs stored in the clear, for the SDK", async () => {
    const data = join(tmp(), "data");
    const broker = await openBroker({ data });
    const pushes = new PushConfigs(broker, secretKeeper({ data }));
    try {
      const store = new KvPushNotificationStore(pushes, "helper");
      await store.save(
        "task-1",
        context,
        TaskPushNotificationConfig.fromJSON({
          taskId: "task-1",
          id: "hook-1",
          url: "https://example.org/hook",
          token: "tok-3141",
          authentication: { scheme: "Bearer", credentials: "cred-2718" },
        }),
      );
      const [key] = await pushes.bucket.keys();
      const raw = JSON.stringify((await pushes.bucket.get(key as string))?.value);
      expect(raw).not.toContain("tok-3141");
      expect(raw).not.toContain("cred-2718");
      const [loaded] = await store.load("task-1", context);
      expect(loaded).toMatchObject({ token: "tok-3141", authentication: { credentials: "cred-2718" } });

      // A sealed secret moved to another config's key does not open there.
      const moved = `${(key as string).slice(0, -1)}X`;
      await pushes.bucket.put(moved, (await pushes.bucket.get(key as string))!.value);
      await expect(store.load("task-1", context)).rejects.toThrow();
      await pushes.bucket.delete(moved);

      // Saved by an earlier version, in the clear: still served.
      await pushes.bucket.put(`${(key as string).slice(0, (key as string).lastIndexOf("/") + 1)}_old`, {
        config: { taskId: "task-1", id: "old", url: "https://example.org/old", token: "plain" },
        wireVersion: "1.0",
      });
      await until(
        () => store.load("task-1", context),
        (configs) => configs.length === 2,
        "both configs are listed",
      );
      expect((await store.load("task-1", context)).map((c) => c.token).sort()).toEqual(["plain", "tok-3141"]);
    } finally {
      pushes.close();
      await broker.close();
    }
  });
});
