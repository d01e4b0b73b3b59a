import { describe, expect, it } from "vitest";
import { buildNotification, MessageId, newMessageId } from "../../src/protocol/index.js";

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe("message ids", () => {
  it("are UUIDs version 7 that the schema accepts, with the time first", () => {
    const at = Date.UTC(2026, 10, 25, 8, 0, 0, 123);
    const id = newMessageId(at);
    expect(id).toMatch(UUID_V7);
    expect(MessageId.safeParse(id).success).toBe(true);
    expect(Number.parseInt(id.replaceAll("-", "").slice(0, 12), 16)).toBe(at);
  });

  it("sort by time across milliseconds and never repeat", () => {
    const ids = Array.from({ length: 2_000 }, (_, i) => newMessageId(1_700_000_000_000 + Math.floor(i / 10)));
    expect(new Set(ids).size).toBe(ids.length);
    for (let i = 10; i < ids.length; i += 10) expect((ids[i] as string) > (ids[i - 1] as string)).toBe(true);
  });

  it("are what the message builders use", () => {
    const sender = { agentId: "alice", principalId: "p", layers: [] };
    const headers = buildNotification(sender, "bob", {}).params.headers;
    expect(headers["message-id"]).toMatch(UUID_V7);
  });
});
