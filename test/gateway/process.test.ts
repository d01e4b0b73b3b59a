import type { ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { buildNotification, signMessage } from "../../src/protocol/index.js";
import { runAcp, spawnGateway } from "../helpers/cli.js";
import { ADMIN_TOKEN, api, FrameClient, registerTestAgent } from "../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { tlsCertificate } from "../helpers/tls.js";
import { useTmpDir } from "../helpers/tmp.js";
import { handshake } from "../helpers/messaging.js";

const exited = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.once("exit", (code) => resolve(code));
  });

describe("the gateway process", () => {
  const tmp = useTmpDir();
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) child.kill("SIGKILL");
  });

  it("loses no acknowledged message when killed with SIGKILL mid-stream (embedded)", async () => {
    const data = tmp();
    const first = await spawnGateway(["--data", data]);
    children.push(first.child);
    const alpha = await registerTestAgent(first.url, "agent-alpha", "pa");
    const beta = await registerTestAgent(first.url, "agent-beta", "pb");
    await handshake({ url: first.url } as never, alpha, beta);

    const accepted: string[] = [];
    let killed = false;
    const sendOne = async (n: number) => {
      const body = signMessage(buildNotification(alpha.sender, "agent-beta", { n }), alpha.signer);
      try {
        const res = await api(first.url, "/api/v1/messages", { apiKey: alpha.apiKey, body });
        if (res.status === 202) accepted.push(res.json.id as string);
      } catch {
        // The connection died with the process: not acknowledged, so not promised.
      }
    };
    const stream = (async () => {
      for (let n = 0; n < 2000 && !killed; n += 16) {
        await Promise.all(Array.from({ length: 16 }, (_, i) => sendOne(n + i)));
      }
    })();
    await expect.poll(() => accepted.length, { timeout: 20_000 }).toBeGreaterThan(300);
    first.child.kill("SIGKILL");
    killed = true;
    await stream;
    await exited(first.child);

    const second = await spawnGateway(["--data", data]);
    children.push(second.child);
    const ws = await FrameClient.connect(second.url.replace("http", "ws") + "/api/v1/ws", beta.apiKey);
    const seen = new Map<string, number>();
    for (;;) {
      const frame = await ws.next("new_message", () => true, 3000).catch(() => undefined);
      if (!frame) break;
      seen.set(frame.id, (seen.get(frame.id) ?? 0) + 1);
      ws.send({ type: "acknowledge", id: frame.id, from: frame.from });
    }
    const lost = accepted.filter((id) => !seen.has(id));
    expect(lost).toEqual([]);
    expect([...seen.values()].every((count) => count === 1)).toBe(true);
    await ws.close();
  }, 90_000);

  it("logs structured JSON without keys, tokens or message bodies", async () => {
    const data = tmp();
    const gateway = await spawnGateway(["--data", data]);
    children.push(gateway.child);
    const alpha = await registerTestAgent(gateway.url, "agent-alpha", "pa");
    const beta = await registerTestAgent(gateway.url, "agent-beta", "pb");
    await handshake({ url: gateway.url } as never, alpha, beta);
    const secretBody = "body-marker-7f3a";
    await api(gateway.url, "/api/v1/messages", {
      apiKey: alpha.apiKey,
      body: signMessage(buildNotification(alpha.sender, "agent-beta", { note: secretBody }), alpha.signer),
    });
    await api(gateway.url, "/api/v1/agents", { apiKey: "acp_wrong-key-marker" });
    gateway.child.kill("SIGTERM");
    await exited(gateway.child);
    const log = gateway.output();
    expect(log).toContain('"msg":"agent registered"');
    for (const secret of [
      alpha.apiKey,
      beta.apiKey,
      ADMIN_TOKEN,
      secretBody,
      "wrong-key-marker",
      alpha.identity.signing.d,
    ]) {
      expect(log).not.toContain(secret);
    }
  });

  it("shuts down gracefully on SIGTERM", async () => {
    const gateway = await spawnGateway(["--data", tmp()]);
    children.push(gateway.child);
    expect((await api(gateway.url, "/healthz")).status).toBe(200);
    gateway.child.kill("SIGTERM");
    expect(await exited(gateway.child)).toBe(0);
    expect(gateway.output()).toContain("shutting down");
  });

  it("refuses a non-loopback address without TLS unless --insecure", async () => {
    const refused = await runAcp(["gateway", "--host", "0.0.0.0", "--port", "0", "--data", tmp()]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("--insecure");
  });

  it("serves HTTPS with --tls-cert/--tls-key", async () => {
    const dir = tmp();
    const { cert, key } = tlsCertificate(dir);
    const gateway = await spawnGateway(["--data", dir, "--tls-cert", cert, "--tls-key", key]);
    children.push(gateway.child);
    expect(gateway.url.startsWith("https://")).toBe(true);
    const { request } = await import("node:https");
    const { readFileSync } = await import("node:fs");
    const body = await new Promise<{ status: number; protocol: string }>((resolve, reject) => {
      const req = request(`${gateway.url}/healthz`, { ca: readFileSync(cert) }, (res) => {
        const protocol = (res.socket as import("node:tls").TLSSocket).getProtocol() ?? "";
        res.resume();
        res.on("end", () => resolve({ status: res.statusCode ?? 0, protocol }));
      });
      req.on("error", reject);
      req.end();
    });
    expect(body.status).toBe(200);
    expect(body.protocol).toBe("TLSv1.3");
  });
});

describeWithNats("the gateway process on NATS", () => {
  const tmp = useTmpDir();
  const nats = useNatsServer();
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) child.kill("SIGKILL");
  });

  it("keeps its own audit logs under --data, so two gateways on one NATS never share a log", async () => {
    const server = await nats();
    const [dataA, dataB] = [tmp(), tmp()];
    const a = await spawnGateway(["--nats", server.url, "--data", dataA]);
    children.push(a.child);
    const b = await spawnGateway(["--nats", server.url, "--data", dataB]);
    children.push(b.child);
    expect(a.output()).toContain(`data in ${dataA}`);
    const alpha = await registerTestAgent(a.url, "agent-alpha", "pa");
    const beta = await registerTestAgent(a.url, "agent-beta", "pb");
    await handshake({ url: a.url } as never, alpha, beta);
    const viaB = signMessage(buildNotification(beta.sender, "agent-alpha", { via: "b" }), beta.signer);
    expect((await api(b.url, "/api/v1/messages", { apiKey: beta.apiKey, body: viaB })).status).toBe(202);
    const logged = (data: string, agent: string) => existsSync(join(data, "relay-audit", agent));
    // Each gateway logs what it relayed in its own directory: A the handshake, B the notification.
    await expect.poll(() => logged(dataB, "agent-beta")).toBe(true);
    expect(logged(dataA, "agent-alpha")).toBe(true);
    expect(logged(dataB, "agent-alpha")).toBe(false);
    expect((await api(b.url, "/healthz")).json).toMatchObject({ status: "ok" });
  }, 60_000);
});
