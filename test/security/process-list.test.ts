/**
 * Another local user reads every process's command line (`ps`, /proc/<pid>/cmdline). The NATS
 * password and token therefore have alternatives to argv: `--nats-pass-file`/`--nats-token-file`
 * and `ACP_NATS_PASS`/`ACP_NATS_TOKEN`. Replayed with a real `acp gateway` on a real nats-server
 * that requires them: the gateway connects, and its command line does not hold the secret.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { runAcp } from "../helpers/cli.js";
import { api } from "../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { useTmpDir } from "../helpers/tmp.js";
import { type GatewayChild, spawnGateway } from "../reliability/support/processes.js";

describeWithNats("NATS secrets and the process list", () => {
  const tmp = useTmpDir("acp-sec-ps-");
  const nats = useNatsServer();
  const gateways: GatewayChild[] = [];
  afterEach(async () => {
    for (const gateway of gateways.splice(0)) await gateway.stop();
  });

  const commandLine = (gateway: GatewayChild) =>
    readFileSync(`/proc/${gateway.pid}/cmdline`, "utf8").split("\0").join(" ");

  it("--nats-pass-file: connects, and the password is not on the command line", async () => {
    const server = await nats({ user: "acp", pass: "pass-0f1e2d3c" });
    const dir = tmp();
    const file = join(dir, "nats-pass");
    writeFileSync(file, "pass-0f1e2d3c\n", { mode: 0o600 });
    const gateway = await spawnGateway({
      cli: [
        "--data",
        join(dir, "data"),
        "--nats",
        server.url,
        "--nats-user",
        "acp",
        "--nats-pass-file",
        file,
      ],
    });
    gateways.push(gateway);
    expect((await api(gateway.url, "/healthz")).json).toMatchObject({ status: "ok", broker: "nats" });
    expect(commandLine(gateway)).toContain("--nats-pass-file");
    expect(commandLine(gateway)).not.toContain("pass-0f1e2d3c");
  });

  it("ACP_NATS_TOKEN: connects, and the token is not on the command line", async () => {
    const server = await nats({ token: "token-9a8b7c6d" });
    const dir = tmp();
    const gateway = await spawnGateway({
      cli: ["--data", join(dir, "data"), "--nats", server.url],
      env: { ACP_NATS_TOKEN: "token-9a8b7c6d" },
    });
    gateways.push(gateway);
    expect((await api(gateway.url, "/healthz")).json).toMatchObject({ status: "ok", broker: "nats" });
    expect(commandLine(gateway)).not.toContain("token-9a8b7c6d");
  });

  it("names the flag when the file is missing or empty, or both forms are given", async () => {
    const dir = tmp();
    const empty = join(dir, "empty");
    writeFileSync(empty, "");
    const base = ["gateway", "--port", "0", "--data", join(dir, "data"), "--nats", "nats://127.0.0.1:1"];
    const missing = await runAcp([...base, "--nats-token-file", join(dir, "nope")]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`--nats-token-file: cannot read ${join(dir, "nope")} (ENOENT)`);
    const blank = await runAcp([...base, "--nats-pass-file", empty]);
    expect(blank.stderr).toContain(`--nats-pass-file: ${empty} is empty`);
    const both = await runAcp([...base, "--nats-pass", "x", "--nats-pass-file", empty]);
    expect(both.stderr).toContain("give --nats-pass or --nats-pass-file, not both");
  });
});
