/**
 * The gateway's own address, from its configuration: the URL it gives out, the Host names that are
 * its own (checked only when bound to loopback), and the browser origins it allows.
 */
import { describe, expect, it } from "vitest";
import { checkOrigin, checkPublicUrl, GatewayAddress } from "../../src/gateway/address.js";

describe("GatewayAddress", () => {
  it("bound to loopback: its URL, the loopback names at its port, and Host checked", () => {
    const address = new GatewayAddress({ host: "127.0.0.1", tls: false });
    address.bound(8700);
    expect(address.publicUrl).toBe("http://127.0.0.1:8700");
    expect(address.checksHost).toBe(true);
    for (const host of ["127.0.0.1:8700", "localhost:8700", "LOCALHOST:8700", "[::1]:8700"])
      expect(address.isOwnHost(host), host).toBe(true);
    for (const host of ["127.0.0.1:8701", "evil.example.com", "evil.example.com:8700", undefined])
      expect(address.isOwnHost(host), String(host)).toBe(false);
    expect(address.isAllowedOrigin("http://localhost:8700")).toBe(true);
    expect(address.isAllowedOrigin("https://localhost:8700")).toBe(false);
    expect(address.isAllowedOrigin("null")).toBe(false);
  });

  it("on the scheme's default port a Host without the port is its own too", () => {
    const address = new GatewayAddress({ host: "::1", tls: true });
    address.bound(443);
    expect(address.publicUrl).toBe("https://[::1]:443");
    expect(address.isOwnHost("localhost")).toBe(true);
    expect(address.isOwnHost("[::1]:443")).toBe(true);
    expect(address.isAllowedOrigin("https://localhost")).toBe(true);
  });

  it("bound to every address: no URL of its own unless configured, and Host is not checked", () => {
    const wildcard = new GatewayAddress({
      host: "0.0.0.0",
      tls: true,
      allowedOrigins: ["https://app.example.com/"],
    });
    wildcard.bound(8443);
    expect(wildcard.publicUrl).toBeUndefined();
    expect(wildcard.checksHost).toBe(false);
    expect(wildcard.isAllowedOrigin("https://app.example.com")).toBe(true);
    expect(wildcard.isAllowedOrigin("https://0.0.0.0:8443")).toBe(false);

    const configured = new GatewayAddress({
      host: "::",
      tls: false,
      publicUrl: "https://acp.example.com/x/",
    });
    configured.bound(8080);
    expect(configured.publicUrl).toBe("https://acp.example.com/x");
    expect(configured.isOwnHost("acp.example.com")).toBe(true);
    expect(configured.isAllowedOrigin("https://acp.example.com")).toBe(true);
  });

  it("refuses a public URL or an origin that is not one, naming it", () => {
    expect(() => checkPublicUrl("ftp://x")).toThrow('public URL "ftp://x" must be an http(s) URL');
    expect(() => checkPublicUrl("https://x/?q=1")).toThrow(/without query/);
    expect(checkOrigin("https://app.example.com/")).toBe("https://app.example.com");
    expect(() => checkOrigin("https://app.example.com/path")).toThrow(/must be an origin/);
    expect(() => new GatewayAddress({ host: "127.0.0.1", tls: false, allowedOrigins: ["*"] })).toThrow(
      /allowed origin "\*"/,
    );
  });
});
