import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { DATABASE_FILE, openBroker } from "../../src/broker/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { brokerConformance } from "./conformance.js";
import { message, reader } from "./support.js";

const tmp = useTmpDir("acp-broker-");

brokerConformance("embedded (SQLite)", async () => {
  const data = tmp();
  return { open: (options) => openBroker({ ...options, data }), store: { data } };
});

describe("embedded broker: a database made before message priorities", () => {
  it("gets the priority column, its queued messages medium, and new ones ranked", async () => {
    const data = tmp();
    const before = await openBroker({ data });
    const old = message("alice", "bob");
    await before.submit(old);
    await before.close();
    // The schema as it was: no priority column, schema_version 2.
    const db = new Database(join(data, DATABASE_FILE));
    db.exec(
      "ALTER TABLE messages DROP COLUMN priority; UPDATE meta SET value = 2 WHERE name = 'schema_version'",
    );
    db.close();

    const broker = await openBroker({ data });
    try {
      const urgent = message("carol", "bob", { priority: "critical" });
      await broker.submit(urgent);
      const inbox = reader(await broker.openInbox("bob"));
      expect(await inbox.next()).toMatchObject({ id: urgent.id, priority: "critical" });
      expect(await inbox.next()).toMatchObject({ id: old.id, priority: "medium" });
    } finally {
      await broker.close();
    }
    const after = new Database(join(data, DATABASE_FILE), { readonly: true });
    expect(after.prepare("SELECT value FROM meta WHERE name = 'schema_version'").get()).toEqual({ value: 5 });
    after.close();
  });
});
