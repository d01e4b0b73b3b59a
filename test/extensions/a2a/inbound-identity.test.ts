import { readdir, readFile, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { type Task, TaskState } from "@a2a-js/sdk";
import { ClientFactory } from "@a2a-js/sdk/client";
import { describe, expect, it } from "vitest";
import type { InboundContext } from "../../../src/client/index.js";
import { a2aInboundExtension } from "../../../src/extensions/a2a/inbound/extension.js";
import { CUSTODY_KEY_FILE, parseKek } from "../../../src/extensions/custody/kek.js";
import { secretKeeper, unseal } from "../../../src/extensions/custody/sealing.js";
import type { SealedSecret } from "../../../src/gateway/secrets.js";
import { agentFor } from "../../client/fixtures.js";
import { runAcp } from "../../helpers/cli.js";
import { startTestGateway, type TestGateway } from "../../helpers/gateway.js";
import { freePort } from "../../helpers/ports.js";
import { useTmpDir } from "../../helpers/tmp.js";
import { until } from "../../helpers/until.js";
import { sendRequest } from "./inbound-bed.js";

const tmp = useTmpDir("acp-a2a-restart-");

/** The bridge identity file a gateway keeps under `data` (there is one caller in these tests). */
async function bridgeFile(data: string): Promise<string> {
  const dir = join(data, "a2a-bridge");
  const names = (await readdir(dir)).filter((n) => /^a2a-[0-9a-f]{8}-[0-9a-f]{16}\.json$/.test(n));
  expect(names).toHaveLength(1);
  return join(dir, names[0] ?? "");
}

/** Opens a sealed bridge identity file the way the gateway does, with the data directory's custody key. */
async function unsealedBridgeFile(data: string, file: string): Promise<string> {
  const kek = parseKek(await readFile(join(data, CUSTODY_KEY_FILE), "utf8"), "custody.key");
  const { sealed } = JSON.parse(await readFile(file, "utf8")) as { sealed: SealedSecret };
  return unseal(kek, sealed, `acp-a2a-bridge-agent:v1:${basename(file, ".json")}`);
}

describe.each([
  { stored: "sealed" },
  { stored: "in the clear (as written before bridge identities were sealed)" },
])("A2A bridge identities across a gateway restart, stored $stored", ({ stored }) => {
  it("reuses the stored bridge identity: same agent, no second handshake; the file is sealed", async () => {
    const dir = tmp();
    const data = join(dir, "data");
    const port = await freePort();
    const start = () =>
      startTestGateway({
        dataDir: data,
        port,
        extensions: [a2aInboundExtension({ dataDir: data, secrets: secretKeeper({ data }) })],
      });
    let gw: TestGateway = await start();
    const helper = await gw.register("helper", "p-helper", { capabilities: ["a2a"] });
    const caller = await gw.register("alice-client", "p-alice");
    const agent = agentFor(gw, helper, join(dir, "helper"));
    const seen: InboundContext[] = [];
    agent.onRequest((body, context) => {
      seen.push(context);
      return { text: `ok ${String(body.text)}` };
    });
    let handshakes = 0;
    agent.on("handshake", (event) => {
      if (event.step === "trust") handshakes++;
    });
    await agent.connect();
    const send = async (text: string) => {
      const client = await new ClientFactory().createFromUrl(`${gw.url}/a2a/helper/`);
      return (await client.sendMessage(sendRequest(text), {
        serviceParameters: { "x-api-key": caller.apiKey },
      })) as Task;
    };
    try {
      expect((await send("one")).status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      await gw.gateway.close();
      const file = await bridgeFile(data);
      const plain = await unsealedBridgeFile(data, file);
      const { identity, apiKey } = JSON.parse(plain) as {
        identity: { signing: { d: string } };
        apiKey: string;
      };
      if (stored === "sealed") {
        const text = await readFile(file, "utf8");
        expect(text).not.toContain(identity.signing.d);
        expect(text).not.toContain(apiKey);
      } else {
        await writeFile(file, plain, { mode: 0o600 });
      }
      gw = await start();
      await until(
        () => agent.connected,
        (connected) => connected,
        "the agent reconnected to the restarted gateway",
      );
      expect((await send("two")).status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(seen).toHaveLength(2);
      expect(seen[1]?.from).toBe(seen[0]?.from);
      expect(handshakes).toBe(1);
      // A file in the clear was sealed in place: same identity, no secret left readable.
      const after = await readFile(file, "utf8");
      expect(after).not.toContain(identity.signing.d);
      expect(after).not.toContain(apiKey);
      expect(await unsealedBridgeFile(data, file)).toBe(plain);
    } finally {
      await agent.close();
      await gw.close();
    }
  });
});

describe("acp agent register --a2a", () => {
  it("publishes the agent (card URL printed, card served)", async () => {
    const dir = tmp();
    const gw = await startTestGateway({ dataDir: join(dir, "data") });
    try {
      const key = join(dir, "helper.key");
      const keygen = await runAcp([
        "keygen",
        "--agent-id",
        "helper",
        "--principal-id",
        "alice",
        "--out",
        key,
      ]);
      expect(keygen.code, keygen.stderr).toBe(0);
      const registered = await runAcp(["agent", "register", "--a2a", "--capability", "summarize"], {
        env: { ACP_GATEWAY: gw.url, ACP_KEY: key, ACP_ADMIN_TOKEN: gw.adminToken },
      });
      expect(registered.code, registered.stderr).toBe(0);
      const cardUrl = `${gw.url}/a2a/helper/.well-known/agent-card.json`;
      expect(registered.stdout).toContain(`published to A2A clients: agent card at ${cardUrl}`);
      const card = (await (await fetch(cardUrl)).json()) as { skills: { id: string }[] };
      expect(card.skills.map((s) => s.id)).toEqual(["summarize"]);
    } finally {
      await gw.close();
    }
  });
});
