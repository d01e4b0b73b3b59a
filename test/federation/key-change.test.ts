import { rmSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { useOrganizations } from "../helpers/federation.js";
import { ADMIN_TOKEN, api } from "../helpers/gateway.js";
import { until } from "../helpers/until.js";

const { linkedPair } = useOrganizations();

const admin = { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } };

describe("federation: a peer's gateway key changes", () => {
  it("is held: its traffic is refused and shown as a pending key change until an admin accepts it", async () => {
    const pair = await linkedPair();
    const { orgA, b } = pair;
    let { a } = pair;
    const pinned = pair.admitted.byB.pinned_keys as string[];
    const { registered: alphaReg } = await a.agent("alpha");
    const { agent: beta } = await b.agent("beta");
    const got: number[] = [];
    beta.onNotification((body) => {
      got.push(body.n as number);
    });

    // a.test gets a new federation key (its key file lost, or a.test taken over).
    await a.close();
    rmSync(join(orgA.dir, "data", "federation", "gateway-key.json"));
    a = await pair.startAgain("a");
    const alpha = await a.connect(alphaReg);
    await expect(alpha.handshake("beta@b.test", { timeoutMs: 3_000 })).rejects.toThrow();

    const status = await until(
      () => api(b.url, "/api/v1/federation", admin),
      (r) => (r.json.peers as { pending_keys?: unknown }[])[0]?.pending_keys !== undefined,
      "b.test shows a.test's pending key change",
    );
    const peer = (
      status.json.peers as { pinned_keys: string[]; pending_keys: { kids: string[]; seen_at: string } }[]
    )[0];
    expect(peer?.pinned_keys).toEqual(pinned);
    expect(peer?.pending_keys.kids).not.toEqual(pinned);
    // The camelCase names are still sent, for the deprecation period.
    expect(peer).toMatchObject({
      pinnedKeys: pinned,
      pendingKeys: { kids: peer?.pending_keys.kids, seenAt: peer?.pending_keys.seen_at },
    });
    expect(got).toEqual([]);

    const accepted = await api(b.url, "/api/v1/federation/peers/a.test/accept-key", { ...admin, body: {} });
    expect(accepted.status).toBe(200);
    expect(accepted.json.pinned_keys).toEqual(peer?.pending_keys.kids);
    expect(accepted.json.pinnedKeys).toEqual(peer?.pending_keys.kids);
    await alpha.handshake("beta@b.test");
    await alpha.notify("beta@b.test", { n: 1 });
    await until(
      () => got,
      (g) => g.includes(1),
      "beta gets alpha's notification once the key is accepted",
    );
  });
});
