import { afterEach, describe, expect, it, vi } from "vitest";
import { AcpAgent, type AgentWarning } from "../../src/client/index.js";
import { buildAnnounce, ErrorCode } from "../../src/protocol/index.js";
import { ProtocolVersions } from "../../src/wire/versions.js";
import { api, FrameClient, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { errorOf, submit } from "../helpers/messaging.js";

const DAY_MS = 86_400_000;
const DEPRECATED_AT = Date.parse("2026-03-01T00:00:00Z");
/** 1.1.0 is current; 1.0.0 was deprecated on DEPRECATED_AT, so its sunset is 180 days later. */
const TABLE = [
  { version: "1.1.0", status: "current" as const },
  { version: "1.0.0", status: "deprecated" as const, deprecatedAt: new Date(DEPRECATED_AT).toISOString() },
];
const SUNSET_AT = DEPRECATED_AT + 180 * DAY_MS;
const CAPS = { capabilities: [], purpose: "p" };

describe("the protocol version table", () => {
  it("ages a deprecated version: spoken until its sunset (180 days by default), then retired", () => {
    const versions = ProtocolVersions.of(TABLE);
    expect(versions.statusAt("1.0.0", SUNSET_AT - 1)).toBe("deprecated");
    expect(versions.statusAt("1.0.0", SUNSET_AT)).toBe("retired");
    expect(versions.statusAt("9.9.9")).toBe("unknown");
    expect(versions.spoken(SUNSET_AT - 1)).toEqual(["1.1.0", "1.0.0"]);
    expect(versions.spoken(SUNSET_AT)).toEqual(["1.1.0"]);
    expect(versions.newest).toBe("1.1.0");
    // An agent that can speak the current version is not told of the old one's deprecation.
    expect(versions.deprecationOf(["1.0.0", "1.1.0"], DEPRECATED_AT)).toBeUndefined();
    expect(versions.deprecationOf(["1.0.0"], DEPRECATED_AT)).toEqual({
      version: "1.0.0",
      deprecatedAt: "2026-03-01T00:00:00.000Z",
      sunsetAt: "2026-08-28T00:00:00.000Z",
    });
    expect(versions.deprecationOf(["1.0.0"], SUNSET_AT)).toBeUndefined();
  });

  it("refuses a table that breaks the compatibility policy, naming the entry", () => {
    const refuse = (table: Parameters<typeof ProtocolVersions.of>[0], message: RegExp) =>
      expect(() => ProtocolVersions.of(table)).toThrow(message);
    refuse(
      [{ version: "1.0", status: "current" }],
      /versions\[0\]\.version: must be a version such as 1\.0\.0/,
    );
    refuse(
      [{ version: "1.0.0", status: "deprecated", deprecatedAt: "2026-01-01T00:00:00Z" }],
      /at least one must be current/,
    );
    refuse(
      [
        { version: "2.0.0", status: "current" },
        { version: "1.0.0", status: "deprecated" },
      ],
      /versions\[1\]\.deprecatedAt: a deprecated version needs its date/,
    );
    refuse(
      [
        { version: "2.0.0", status: "current" },
        {
          version: "1.0.0",
          status: "deprecated",
          deprecatedAt: "2026-02-01T00:00:00Z",
          sunsetAt: "2026-01-01T00:00:00Z",
        },
      ],
      /versions\[1\]\.sunsetAt: must be a date after deprecatedAt/,
    );
    // Two majors back stay supported: 1.x is the newest of major 1 while 3.0.0 is current.
    refuse(
      [
        { version: "3.0.0", status: "current" },
        { version: "1.4.0", status: "retired" },
      ],
      /1\.4\.0 is the newest of major 1, which must stay supported \(2 majors back\)/,
    );
    expect(() =>
      ProtocolVersions.of([
        { version: "4.0.0", status: "current" },
        { version: "1.4.0", status: "retired" },
      ]),
    ).not.toThrow();
  });
});

describe("protocol versions at the gateway", () => {
  const gateways: TestGateway[] = [];
  const open = async (options: Record<string, unknown> = {}) => {
    const gw = await startTestGateway(options);
    gateways.push(gw);
    return gw;
  };
  afterEach(async () => {
    vi.useRealTimers();
    for (const gw of gateways.splice(0)) await gw.close();
  });
  /** Only Date is faked (once: the relay keeps the Date.now it was built with); timers run as usual. */
  const at = (ms: number) => {
    if (!vi.isFakeTimers()) vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(ms);
  };
  const register = (gw: TestGateway, body: Record<string, unknown>) =>
    api(gw.url, "/api/v1/agents", { body, headers: { authorization: `Bearer ${gw.adminToken}` } });

  it("refuses a version it does not speak at registration (-32015 naming the field) and registers nothing", async () => {
    const gw = await open();
    const probe = await gw.register("agent-probe");
    const body = (agentId: string, protocolVersions: string[]) => ({
      agentId,
      principalId: "p",
      signing: probe.identity.signing,
      protocolVersions,
    });
    for (const agentId of ["agent-one", "agent-two"]) {
      const refused = await register(gw, body(agentId, ["1.0.0", "9.9.9"]));
      expect(refused.status).toBe(400);
      expect(errorOf(refused.json)).toMatchObject({
        code: ErrorCode.NoCommonVersion,
        message: "9.9.9 is not a protocol version this gateway speaks (it speaks 1.0.0)",
        data: { problems: [{ path: "/protocol_versions/1" }], supported: ["1.0.0"] },
      });
      expect((await api(gw.url, `/api/v1/agents/${agentId}`, { apiKey: probe.apiKey })).status).toBe(404);
    }
    // Declaring nothing registers the gateway's newest current version.
    const plain = await gw.register("agent-plain");
    const view = await api(gw.url, "/api/v1/agents/agent-plain", { apiKey: plain.apiKey });
    expect(view.json.protocol_versions).toEqual(["1.0.0"]);
    const versions = await api(gw.url, "/api/v1/versions", { apiKey: plain.apiKey });
    expect(versions.json).toEqual({
      versions: [{ version: "1.0.0", status: "current" }],
      // The policy's camelCase names are deprecated copies.
      policy: {
        compatible_majors_back: 2,
        default_sunset_days: 180,
        compatibleMajorsBack: 2,
        defaultSunsetDays: 180,
      },
    });
    expect((await api(gw.url, "/api/v1/versions")).status).toBe(401);
  });

  it("tells an agent on a deprecated version so: Deprecation and Sunset headers, the ready frame, the SDK, the dashboard", async () => {
    at(DEPRECATED_AT + 10 * DAY_MS);
    const gw = await open({ protocolVersions: TABLE });
    const old = await gw.register("agent-old", "p-old", { protocolVersions: ["1.0.0"] });
    const both = await gw.register("agent-both", "p-both", { protocolVersions: ["1.1.0", "1.0.0"] });

    const sent = await submit(gw, old, buildAnnounce(old.sender, "agent-both", CAPS));
    expect(sent.status).toBe(202);
    expect(sent.headers.get("deprecation")).toBe(`@${DEPRECATED_AT / 1000}`);
    expect(sent.headers.get("sunset")).toBe("Fri, 28 Aug 2026 00:00:00 GMT");
    const own = await api(gw.url, "/api/v1/agents/agent-old", { apiKey: old.apiKey });
    expect(own.headers.get("sunset")).toBe("Fri, 28 Aug 2026 00:00:00 GMT");
    // The agent that speaks 1.1.0 is not using a deprecated version, even when it talks 1.0.0.
    const answer = await submit(
      gw,
      both,
      buildAnnounce({ ...both.sender, trustLayerVersion: "1.0.0" }, "agent-old", { ...CAPS, reply: true }),
    );
    expect(answer.status).toBe(202);
    expect(answer.headers.get("deprecation")).toBeNull();

    const ws = await FrameClient.connect(gw.gateway.wsUrl, old.apiKey);
    expect(await ws.next("ready")).toMatchObject({
      deprecation: {
        version: "1.0.0",
        deprecatedAt: "2026-03-01T00:00:00.000Z",
        sunsetAt: "2026-08-28T00:00:00.000Z",
      },
    });
    await ws.close();

    const agent = new AcpAgent({
      gateway: gw.url,
      identity: old.identity,
      apiKey: old.apiKey,
      audit: false,
      state: false,
    });
    const warnings: AgentWarning[] = [];
    agent.on("warning", (warning) => warnings.push(warning));
    await agent.connect();
    await agent.close();
    expect(warnings).toEqual([
      {
        code: "ProtocolDeprecated",
        message:
          "protocol 1.0.0 is deprecated since 2026-03-01T00:00:00.000Z and will be refused from 2026-08-28T00:00:00.000Z: register a newer version",
        deprecation: {
          version: "1.0.0",
          deprecatedAt: "2026-03-01T00:00:00.000Z",
          sunsetAt: "2026-08-28T00:00:00.000Z",
        },
      },
    ]);

    const dashboard = await api(gw.url, "/api/v1/dashboard/agents", {
      headers: { authorization: `Bearer ${gw.adminToken}` },
    });
    const byId = new Map(
      (dashboard.json.agents as { agentId: string; deprecation?: unknown }[]).map((a) => [a.agentId, a]),
    );
    expect(byId.get("agent-old")?.deprecation).toMatchObject({
      version: "1.0.0",
      sunsetAt: "2026-08-28T00:00:00.000Z",
    });
    expect(byId.get("agent-both")?.deprecation).toBeUndefined();
  });

  it("blocks a deprecated version from its sunset: at registration and in the relay", async () => {
    at(SUNSET_AT - DAY_MS);
    const gw = await open({ protocolVersions: TABLE });
    const old = await gw.register("agent-old", "p-old", { protocolVersions: ["1.0.0"] });
    const both = await gw.register("agent-both", "p-both", { protocolVersions: ["1.1.0", "1.0.0"] });
    const newer = await gw.register("agent-new", "p-new", { protocolVersions: ["1.1.0"] });
    expect((await submit(gw, old, buildAnnounce(old.sender, "agent-both", CAPS))).status).toBe(202);

    at(SUNSET_AT);
    const blocked = await submit(gw, old, buildAnnounce(old.sender, "agent-both", CAPS));
    expect(blocked.status).toBe(400);
    expect(errorOf(blocked.json)).toMatchObject({
      code: ErrorCode.NoCommonVersion,
      data: { supported: ["1.1.0"] },
    });
    expect(errorOf(blocked.json).message).toContain("share no protocol version this gateway still speaks");
    // No more headers to announce: the version is gone, not deprecated.
    expect(blocked.headers.get("deprecation")).toBeNull();
    const late = await register(gw, {
      agentId: "agent-late",
      principalId: "p",
      signing: old.identity.signing,
      protocolVersions: ["1.0.0"],
    });
    expect(errorOf(late.json)).toMatchObject({
      code: ErrorCode.NoCommonVersion,
      message: "1.0.0 is retired (it speaks 1.1.0)",
      data: { problems: [{ path: "/protocol_versions/0", message: "1.0.0 is retired" }] },
    });
    // The agent that also speaks 1.1.0 goes on under it.
    const onCurrent = await submit(
      gw,
      both,
      buildAnnounce({ ...both.sender, trustLayerVersion: "1.1.0" }, "agent-new", CAPS),
    );
    expect(onCurrent.status).toBe(202);
    const versions = await api(gw.url, "/api/v1/versions", { apiKey: newer.apiKey });
    expect(versions.json.versions).toEqual([
      { version: "1.1.0", status: "current" },
      {
        version: "1.0.0",
        status: "retired",
        deprecated_at: "2026-03-01T00:00:00.000Z",
        sunset_at: "2026-08-28T00:00:00.000Z",
        deprecatedAt: "2026-03-01T00:00:00.000Z",
        sunsetAt: "2026-08-28T00:00:00.000Z",
      },
    ]);
  });

  it("does not start with a table that breaks the policy", async () => {
    await expect(open({ protocolVersions: [{ version: "1.0.0", status: "retired" }] })).rejects.toThrow(
      /at least one must be current/,
    );
  });
});
