/**
 * The outbound URL policy on its own: which addresses are refused, that the connection goes to the
 * address that was checked, that a redirect is never followed, and that an answer is read only up
 * to its limit. Real sockets on 127.0.0.x; the resolver is injected only to play a rebinding DNS.
 */
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { AddressRanges, addressKind } from "../../src/http/addresses.js";
import { OutboundPolicy, OutboundResponseTooLarge, OutboundUrlRefused } from "../../src/http/outbound.js";
import { type RecordingListener, recordingListener } from "../security/helpers.js";

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
});

async function listener(host = "127.0.0.1"): Promise<RecordingListener> {
  const recording = await recordingListener(host);
  closers.push(() => recording.close());
  return recording;
}

async function server(handle: (res: ServerResponse) => void, host = "127.0.0.1"): Promise<string> {
  const http: Server = createServer((req, res) => {
    req.resume();
    handle(res);
  });
  await new Promise<void>((resolve) => http.listen(0, host, resolve));
  closers.push(
    () =>
      new Promise((resolve) => {
        http.closeAllConnections();
        http.close(resolve);
      }),
  );
  return `http://${host}:${(http.address() as AddressInfo).port}`;
}

async function refusal(promise: Promise<unknown>): Promise<OutboundUrlRefused> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OutboundUrlRefused);
  return err as OutboundUrlRefused;
}

describe("address kinds", () => {
  it.each([
    ["8.8.8.8", "public"],
    ["127.0.0.1", "loopback"],
    ["127.255.1.2", "loopback"],
    ["10.1.2.3", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["172.32.0.1", "public"],
    ["192.168.1.1", "private"],
    ["169.254.169.254", "link-local"],
    ["100.64.0.1", "shared"],
    ["100.127.255.254", "shared"],
    ["100.128.0.1", "public"],
    ["198.18.0.1", "benchmarking"],
    ["198.19.255.255", "benchmarking"],
    ["0.0.0.0", "unspecified"],
    ["224.0.0.1", "multicast"],
    ["255.255.255.255", "reserved"],
    ["192.0.2.1", "reserved"],
    ["::", "unspecified"],
    ["[::]", "unspecified"],
    ["::1", "loopback"],
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["::ffff:10.0.0.1", "private"],
    ["::ffff:8.8.8.8", "public"],
    ["64:ff9b::7f00:1", "loopback"],
    ["64:ff9b::a9fe:a9fe", "link-local"],
    ["64:ff9b::808:808", "public"],
    ["64:ff9b:1::1", "private"],
    ["2002:7f00:1::1", "loopback"],
    ["2002:808:808::1", "public"],
    ["::127.0.0.1", "reserved"],
    ["fc00::1", "unique-local"],
    ["fd12:3456::1", "unique-local"],
    ["fe80::1", "link-local"],
    ["fe80::1%eth0", "link-local"],
    ["ff02::1", "multicast"],
    ["2001:db8::1", "reserved"],
    ["2001::1", "reserved"],
    ["2606:4700::1111", "public"],
  ])("%s is %s", (address, kind) => {
    expect(addressKind(address)).toBe(kind);
  });

  it("matches ranges, an IPv6 address carrying IPv4 as that IPv4, and names a bad range", () => {
    const ranges = new AddressRanges(["10.1.0.0/16", "fd00::/8", "192.0.2.7"]);
    expect(ranges.has("10.1.200.3")).toBe(true);
    expect(ranges.has("10.2.0.1")).toBe(false);
    expect(ranges.has("::ffff:10.1.0.9")).toBe(true);
    expect(ranges.has("fd00:1::2")).toBe(true);
    expect(ranges.has("192.0.2.7")).toBe(true);
    expect(ranges.has("192.0.2.8")).toBe(false);
    for (const bad of ["10.0.0.0/33", "example.com", "10.0.0.0/x", "1.2.3.4/8/9", ""])
      expect(() => new AddressRanges([bad])).toThrow(/is not an address range/);
  });
});

describe("OutboundPolicy", () => {
  it("refuses non-http(s) URLs, credentials in the URL, and every non-public address written literally", () => {
    const policy = new OutboundPolicy();
    expect(() => policy.parse("file:///etc/passwd")).toThrow(/file: is not http\(s\)/);
    expect(() => policy.parse("http://user:pw@8.8.8.8/")).toThrow(/user name or password/);
    for (const url of [
      "http://127.0.0.1/",
      "http://2130706433/", // 127.0.0.1 as one number
      "http://0x7f.1/",
      "http://[::]/",
      "http://0.0.0.0/",
      "http://[::ffff:127.0.0.1]/",
      "http://[64:ff9b::7f00:1]/",
      "http://100.64.0.1/",
      "http://198.18.0.1/",
      "http://169.254.169.254/latest/meta-data",
      "http://[fd00::1]/",
    ])
      expect(() => policy.parse(url), url).toThrow(OutboundUrlRefused);
    expect(policy.parse("https://8.8.8.8/x").href).toBe("https://8.8.8.8/x");
  });

  it("refuses a name when any of its addresses is refused; never names the address to the caller", async () => {
    const policy = new OutboundPolicy({ resolve: async () => ["8.8.8.8", "10.0.0.5"] });
    const err = await refusal(policy.check("https://split.example/hook?secret=1"));
    expect(err.message).toBe(
      "https://split.example/hook: resolves to a private address, which the gateway does not call (an operator allows private addresses with --allow-private-urls)",
    );
    expect(err.address).toBe("10.0.0.5");
    // localhost resolves to loopback with the system resolver.
    await refusal(new OutboundPolicy().check("http://localhost:9/"));
  });

  it("allows private addresses when told, all of them or ranges; never the unspecified address", async () => {
    const all = new OutboundPolicy({ allowPrivate: true });
    expect(all.parse("http://127.0.0.1:1/").hostname).toBe("127.0.0.1");
    expect(all.parse("http://[fd00::1]/").hostname).toBe("[fd00::1]");
    // Link-local (cloud metadata) only by an explicit range.
    expect(() => all.parse("http://169.254.169.254/")).toThrow(/link-local/);
    expect(() => all.parse("http://0.0.0.0/")).toThrow(/unspecified/);
    const some = new OutboundPolicy({ allowPrivate: ["10.1.0.0/16"] });
    expect(some.parse("http://10.1.2.3/").hostname).toBe("10.1.2.3");
    expect(() => some.parse("http://10.2.0.1/")).toThrow(OutboundUrlRefused);
  });

  it("connects to the address it checked: a name that rebinds to loopback after the check reaches nothing", async () => {
    const target = await listener();
    let lookups = 0;
    const rebinding = async () => (++lookups === 1 ? ["8.8.8.8"] : ["127.0.0.1"]);
    const policy = new OutboundPolicy({ resolve: rebinding });
    await policy.check(`http://rebind.example:${target.port}/`);
    const err = await refusal(
      policy.fetch(`http://rebind.example:${target.port}/`, { method: "POST", body: "x" }),
    );
    expect(err.reason).toContain("resolves to a loopback address");
    expect(target.connections).toBe(0);
    policy.close();

    // The same name, allowed: the connection goes where the socket's resolution said.
    const allowed = new OutboundPolicy({ resolve: async () => ["127.0.0.1"], allowPrivate: ["127.0.0.1"] });
    await allowed.fetch(`http://rebind.example:${target.port}/`).catch(() => undefined);
    expect(target.connections).toBe(1);
    allowed.close();
  });

  it("never follows a redirect, and says where it pointed", async () => {
    const inside = await listener("127.0.0.2");
    const redirector = await server((res) =>
      res.writeHead(307, { location: `http://127.0.0.2:${inside.port}/admin?token=x` }).end(),
    );
    const policy = new OutboundPolicy({ allowPrivate: ["127.0.0.1"] });
    const err = await refusal(policy.fetch(`${redirector}/hook`, { method: "POST", body: "{}" }));
    expect(err.reason).toBe(
      `answered 307, a redirect to http://127.0.0.2:${inside.port}/admin, which the gateway does not follow`,
    );
    expect(inside.connections).toBe(0);
    policy.close();
  });

  it("stops reading an answer at its limit and closes the connection", async () => {
    let written = 0;
    let closedEarly = false;
    const chunk = Buffer.alloc(64 * 1024, "x");
    const endless = await server((res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.on("close", () => {
        closedEarly = !res.writableFinished;
      });
      const pump = () => {
        while (!res.destroyed && written < 512 * 1024 * 1024) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once("drain", pump);
        }
        res.end();
      };
      pump();
    });
    const policy = new OutboundPolicy({ allowPrivate: true });
    const response = await policy.fetch(endless, { maxResponseBytes: 1024 * 1024 });
    await expect(response.text()).rejects.toBeInstanceOf(OutboundResponseTooLarge);
    await expect.poll(() => closedEarly).toBe(true);
    // What was written before the close is bounded by the socket buffers, not by the 512 MiB answer.
    expect(written).toBeLessThan(64 * 1024 * 1024);

    const declared = await server((res) =>
      res.writeHead(200, { "content-length": String(10 * 1024 * 1024) }).end(),
    );
    await expect(policy.fetch(declared, { maxResponseBytes: 1024 })).rejects.toBeInstanceOf(
      OutboundResponseTooLarge,
    );
    policy.close();
  });
});
