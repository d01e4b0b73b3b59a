/**
 * The embedded store cannot write: the gateway must refuse (503, -32018 StorageUnavailable) rather
 * than acknowledge what it cannot persist, say so on `GET /healthz` (503 degraded, the cause), and
 * recover when it can write again (/healthz 200 before any new message arrives).
 *
 * How "disk full" is made real: the running gateway's RLIMIT_FSIZE is lowered to 1 byte with
 * `prlimit --pid`. Every write past offset 0 of any file then fails with EFBIG — to SQLite a short
 * write, exactly what a full disk produces (Node ignores SIGXFSZ, so the process lives on). It
 * needs no root, no mount and no test-only code path, and it works mid-run, which a read-only
 * `chmod` cannot do (an open file descriptor keeps its write access; root ignores modes anyway).
 * A data directory that is read-only from the start is the second case: the gateway refuses to
 * start and says why. When the tests run as root, the gateway keeps uid 0 but loses every
 * capability (`setpriv`), so file modes bind it like any user while it can still read the
 * checkout wherever that lives (another uid could not, under a 0700 parent such as `mktemp -d`).
 */
import { chmodSync, chownSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ErrorCode } from "../../src/protocol/index.js";
import { ADMIN_TOKEN, api } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import { deliveryFigures, recordFigures } from "./support/figures.js";
import { type GatewayChild, hasCommand, needing, setLimit, spawnGateway } from "./support/processes.js";
import { type CountingRecipient, pairAgents } from "./support/recipient.js";
import { MessageStream } from "./support/stream.js";

const PER_PHASE = 300;
const isRoot = process.getuid?.() === 0;

describe("storage that cannot be written (embedded broker)", () => {
  const tmp = useTmpDir("acp-rel-storage-");
  const gateways: GatewayChild[] = [];
  let recipient: CountingRecipient | undefined;
  afterEach(async () => {
    await recipient?.close();
    recipient = undefined;
    for (const gateway of gateways.splice(0)) await gateway.kill();
  });

  // Linux only, like the rest of this directory (/proc, prlimit from util-linux).
  it("disk full: refuses with 503 -32018, acknowledges nothing it did not store, /healthz degraded, recovers", async () => {
    const data = tmp();
    const cli = ["--data", data, "--rate-limit", "1000000"];
    const gateway = await spawnGateway({ cli });
    gateways.push(gateway);
    const pair = await pairAgents(gateway.url, { sender: "agent-sender", recipient: "agent-recipient" });
    recipient = pair.recipient;
    const phase = (resubmit: boolean) =>
      new MessageStream({
        urls: [gateway.url],
        from: pair.sender,
        to: "agent-recipient",
        count: PER_PHASE,
        concurrency: 16,
        deadlineMs: 60_000,
        resubmit,
      });

    const before = phase(true);
    await before.run();
    expect(await recipient.waitFor(before.acknowledged, 30_000)).toBe(0);

    const healthBefore = await api(gateway.url, "/healthz");

    setLimit(gateway.pid, "fsize", "1");
    const full = phase(false);
    await full.run();
    const registration = await api(gateway.url, "/api/v1/agents", {
      body: { agentId: "agent-late", principalId: "p", signing: pair.sender.identity.signing },
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    const healthWhileFull = await api(gateway.url, "/healthz");

    setLimit(gateway.pid, "fsize", "unlimited");
    // Before any new message: the health check's own write finds the storage writable again.
    const healthAfterRecovery = await api(gateway.url, "/healthz");
    const after = phase(true);
    await after.run();

    // Nothing refused was stored: restart from the same files and read everything back.
    await gateway.kill();
    const restarted = await spawnGateway({ cli, port: gateway.port });
    gateways.push(restarted);
    const acknowledged = new Set([...before.acknowledged, ...after.acknowledged, ...full.acknowledged]);
    const missing = await recipient.waitFor(acknowledged, 60_000);
    const refusedDelivered = [...full.refused].filter((id) => recipient?.deliveries.has(id)).length;
    const refusedStored = await Promise.all(
      [...full.refused].slice(0, 20).map(async (id) => {
        const res = await api(restarted.url, `/api/v1/messages/${id}`, { apiKey: pair.sender.apiKey });
        return res.status;
      }),
    );
    const figures = deliveryFigures(before.sent + full.sent + after.sent, acknowledged, recipient.deliveries);
    recordFigures("storage-disk-full", {
      ...figures,
      acknowledgedBefore: before.acknowledged.size,
      refusedWhileFull: full.refused.size,
      acknowledgedWhileFull: full.acknowledged.size,
      fullAnswers: full.describeAnswers(),
      fullErrorCodes: [...full.errorCodes.entries()].map(([c, n]) => `${c}:${n}`).join(","),
      acknowledgedAfterRecovery: after.acknowledged.size,
      refusedDelivered,
      registrationWhileFull: registration.status,
      healthWhileFull: `${healthWhileFull.status} ${JSON.stringify(healthWhileFull.json)}`,
      healthAfterRecovery: healthAfterRecovery.status,
    });

    expect(before.acknowledged.size).toBe(PER_PHASE);
    expect(full.acknowledged.size).toBe(0);
    expect(full.answers).toEqual(new Map([["503", PER_PHASE]]));
    expect(full.errorCodes).toEqual(new Map([[ErrorCode.StorageUnavailable, PER_PHASE]]));
    expect([registration.status, (registration.json.error as { code: number }).code]).toEqual([
      503,
      ErrorCode.StorageUnavailable,
    ]);
    expect([healthBefore.status, healthBefore.json.status]).toEqual([200, "ok"]);
    // RLIMIT_FSIZE makes SQLite's write fail with EFBIG, which it reports as an I/O error; a full
    // disk (ENOSPC) would read "disk full (SQLITE_FULL)".
    expect([healthWhileFull.status, healthWhileFull.json.status]).toEqual([503, "degraded"]);
    expect(healthWhileFull.json.detail).toEqual({
      storage: "write failed: disk I/O error (SQLITE_IOERR_WRITE)",
      since: expect.stringMatching(/^\d{4}-\d\d-\d\dT[\d:.]+Z$/),
    });
    expect([healthAfterRecovery.status, healthAfterRecovery.json.status]).toEqual([200, "ok"]);
    expect(after.acknowledged.size).toBe(PER_PHASE);
    expect(missing).toBe(0);
    expect(figures.lost).toBe(0);
    expect(figures.duplicated).toBe(0);
    expect(refusedDelivered).toBe(0);
    expect(refusedStored.every((status) => status === 404)).toBe(true);
  }, 180_000);

  needing("setpriv", !isRoot || hasCommand("setpriv")).it(
    "read-only data directory: refuses to start and names the directory",
    async () => {
      const root = tmp();
      const data = join(root, "data");
      mkdirSync(data);
      chmodSync(root, 0o755);
      chmodSync(data, 0o555);
      // Root ignores file modes only through its capabilities (CAP_DAC_OVERRIDE, CAP_FOWNER):
      // clearing the bounding set too keeps exec from granting them back. The directory belongs
      // to another user, so the capability-less root cannot chmod it writable either.
      if (isRoot) chownSync(data, 65534, 65534);
      const prefix = isRoot ? ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--"] : [];
      const started = spawnGateway({ cli: ["--data", data], prefix, env: { HOME: root } });
      const failure = await started.then(
        (gateway) => {
          gateways.push(gateway);
          return "it started";
        },
        (err: Error) => err.message,
      );
      recordFigures("storage-read-only-dir", {
        refusedToStart: failure !== "it started",
        message: failure.split("\n").find((line) => line.includes(data)) ?? failure.slice(0, 200),
      });
      expect(failure).toMatch(/exited \(code 1/);
      expect(failure).toContain(data);
    },
    60_000,
  );
});
