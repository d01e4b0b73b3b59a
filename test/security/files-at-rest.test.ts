/**
 * Files at rest are private: under umask 022 (the usual one, which leaves new files 0644) another
 * local user could read every relayed body in acp.db and its write-ahead log. The data directory
 * must be 0700 and every file the gateway and the SDK write 0600, whatever the umask, and a data
 * directory an earlier version left open is narrowed at start with a warning. The test runs in its
 * own forked worker, so `process.umask` is this process's, gateway and agents alike.
 */
import { chmodSync, lstatSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Session } from "../../src/coordination/index.js";
import { agentFor } from "../client/fixtures.js";
import {
  ADMIN_TOKEN,
  api,
  registerCustodial,
  startTestGateway,
  type TestGateway,
} from "../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { useTmpDir } from "../helpers/tmp.js";

/** Every directory and file under `root` (symbolic links included, never followed) with its mode. */
function modesUnder(root: string): Map<string, number> {
  const modes = new Map<string, number>();
  const walk = (path: string) => {
    const info = lstatSync(path);
    modes.set(path.slice(root.length) || "/", info.mode & 0o777);
    if (info.isDirectory()) for (const name of readdirSync(path)) walk(join(path, name));
  };
  walk(root);
  return modes;
}

/** The entries whose mode lets anyone but the owner in: directories not 0700, files not 0600. */
function openToOthers(root: string): string[] {
  return [...modesUnder(root)]
    .filter(([path, mode]) => {
      const isDir = lstatSync(join(root, path)).isDirectory();
      return mode !== (isDir ? 0o700 : 0o600);
    })
    .map(([path, mode]) => `${path} ${mode.toString(8)}`);
}

/**
 * Traffic that makes the gateway write everything it writes: agents (one custodial, so the custody
 * key), a handshake and a request answered through the SDK (audit logs, SDK state), an A2A call
 * (the A2A bridge's identity, its state and audit).
 */
async function traffic(gw: TestGateway, agentsDir: string): Promise<void> {
  const alphaTest = await gw.register("alpha", "p-alpha", { capabilities: ["a2a"] });
  const betaTest = await gw.register("beta", "p-beta");
  const custodial = await registerCustodial(gw.url, "held", { principalId: "p-held" });
  expect(custodial.status).toBe(201);
  const alpha = agentFor(gw, alphaTest, join(agentsDir, "alpha"));
  const beta = agentFor(gw, betaTest, join(agentsDir, "beta"));
  alpha.onRequest((body) => ({ echo: body }));
  await alpha.connect();
  await beta.connect();
  try {
    expect(await beta.request("alpha", { secret: "relayed body" })).toEqual({
      echo: { secret: "relayed body" },
    });
    const a2a = await fetch(`${gw.url}/a2a/alpha`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": betaTest.apiKey },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "message/send",
        params: {
          message: { kind: "message", messageId: "m-1", role: "user", parts: [{ kind: "text", text: "hi" }] },
        },
      }),
    });
    expect(a2a.status).toBe(200);
  } finally {
    await alpha.close();
    await beta.close();
  }
}

describe("files at rest under umask 022", () => {
  const tmp = useTmpDir("acp-sec-files-");
  let umask = 0;
  beforeAll(() => {
    umask = process.umask(0o022);
  });
  afterAll(() => {
    process.umask(umask);
  });

  it("embedded: the data directory is 0700 and every file in it 0600, the database and its log included", async () => {
    const root = tmp();
    const data = join(root, "data");
    const gw = await startTestGateway({ dataDir: data });
    let whileRunning: string[];
    let walSeen: boolean;
    try {
      await traffic(gw, join(root, "agents"));
      // While it runs: the write-ahead log holds the latest bodies.
      walSeen = modesUnder(data).has("/acp.db-wal");
      whileRunning = openToOthers(data);
    } finally {
      await gw.close();
    }
    expect(walSeen).toBe(true);
    expect(whileRunning).toEqual([]);
    expect(openToOthers(data)).toEqual([]);
    // What the SDK keeps (handshake store, handled log, audit log) is private too.
    expect(openToOthers(join(root, "agents"))).toEqual([]);
    const files = [...modesUnder(data).keys()];
    for (const expected of ["/acp.db", "/custody.key", "/relay-audit", "/a2a-bridge", "/a2a-audit"]) {
      expect(files).toContain(expected);
    }
  }, 60_000);

  it("narrows a data directory and database an earlier version left open, and says so", async () => {
    const root = tmp();
    const data = join(root, "data");
    // A first start, then everything opened up as umask 022 used to leave it.
    const first = await startTestGateway({ dataDir: data });
    await first.register("alpha");
    await first.close();
    chmodSync(data, 0o755);
    chmodSync(join(data, "acp.db"), 0o644);
    writeFileSync(join(data, "acp.db-wal"), "");
    chmodSync(join(data, "acp.db-wal"), 0o644);

    const warnings: string[] = [];
    const logger = pino({ level: "warn" }, { write: (line: string) => warnings.push(line) });
    const gw = await startTestGateway({ dataDir: data, logger });
    try {
      expect(modesUnder(data).get("/")).toBe(0o700);
      expect(modesUnder(data).get("/acp.db")).toBe(0o600);
      expect(warnings.join("\n")).toContain("narrowed to owner-only");
      expect(warnings.join("\n")).toContain('"mode":"0755"');
      // The earlier state is intact: the agent registered before is still there.
      const agent = await api(gw.url, "/api/v1/agents/alpha", {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      });
      expect(agent.status).toBe(200);
    } finally {
      await gw.close();
    }
    expect(openToOthers(data)).toEqual([]);
  }, 60_000);

  it("a coordination session directory ACP creates is 0700 (its files are the user's own)", async () => {
    const root = join(tmp(), "context");
    const session = await Session.create({ root });
    expect(lstatSync(session.paths.dir).mode & 0o777).toBe(0o700);
    // An existing directory keeps its mode: sharing a session is the user's choice.
    const shared = join(root, "0f0e0d0c-0b0a-4909-8807-060504030201");
    mkdirSync(shared, { mode: 0o750 });
    chmodSync(shared, 0o750);
    await Session.open({ root, id: "0f0e0d0c-0b0a-4909-8807-060504030201", adopt: true });
    expect(lstatSync(shared).mode & 0o777).toBe(0o750);
  });
});

describeWithNats("files at rest under umask 022 (NATS)", () => {
  const tmp = useTmpDir("acp-sec-files-nats-");
  const startNats = useNatsServer();
  let umask = 0;
  beforeAll(() => {
    umask = process.umask(0o022);
  });
  afterAll(() => {
    process.umask(umask);
  });

  it("the gateway's own data directory (audit logs, keys) is 0700 and its files 0600", async () => {
    const nats = await startNats();
    const root = tmp();
    const data = join(root, "data");
    const gw = await startTestGateway({ dataDir: data, natsUrl: nats.url });
    try {
      await traffic(gw, join(root, "agents"));
    } finally {
      await gw.close();
    }
    expect(modesUnder(data).has("/acp.db")).toBe(false);
    expect(modesUnder(data).has("/relay-audit")).toBe(true);
    expect(openToOthers(data)).toEqual([]);
  }, 60_000);
});
