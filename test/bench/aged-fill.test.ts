/**
 * The aged benchmark's bulk fill (bench/aged/fill.ts) against its broker path on the same small
 * week: the bulk path leaves the rows the broker's own write path leaves (submit, delivery, then
 * acknowledgement or rejection by the recipient), message for message.
 */
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { type FillConfig, fillEmbedded } from "../../bench/aged/fill.js";
import { DATABASE_FILE } from "../../src/broker/index.js";
import { useTmpDir } from "../helpers/tmp.js";

const tmp = useTmpDir("acp-aged-fill-");

interface Row {
  id: string;
  status: string;
  submitted_at: string;
  queued_at: number;
  delivered_at: number | null;
  acknowledged_at: number | null;
  failed_at: number | null;
  last_error: string | null;
  dead_letter_reason: string | null;
  dead_letter_detail: string | null;
  [column: string]: unknown;
}

/**
 * One fill of a 3,000-message week (the fill sets the clock to the week: put back after). Checks
 * that its manifest names the week's last row, up to which the NATS replay replays the store.
 */
async function fill(path: FillConfig["path"], weekEnd: number): Promise<Row[]> {
  const dir = tmp();
  const data = join(dir, "data");
  const now = Date.now;
  let lastSeq: number;
  try {
    ({ lastSeq } = await fillEmbedded({
      data,
      messages: 3_000,
      weekEnd,
      manifest: join(dir, "manifest.json"),
      path,
    }));
  } finally {
    Date.now = now;
  }
  const db = new Database(join(data, DATABASE_FILE), { readonly: true });
  try {
    const rows = db.prepare("SELECT * FROM messages ORDER BY seq").all() as Row[];
    expect(rows).toHaveLength(3_000);
    expect(lastSeq).toBe(rows.at(-1)?.seq);
    return rows;
  } finally {
    db.close();
  }
}

/** How the fill's recipients settle a message: 1.5% rejected, by the id's last two hex digits. */
const settled = (id: string) => (Number.parseInt(id.slice(-2), 16) < 4 ? "failed" : "acknowledged");
const REJECTED = "rejected by recipient: not something this agent does";

describe("aged benchmark: the bulk fill", () => {
  it("leaves the rows the broker's write path leaves", { timeout: 300_000 }, async () => {
    const weekEnd = Date.now();
    const viaBroker = await fill("broker", weekEnd);
    const bulk = await fill("bulk", weekEnd);
    expect(bulk).toHaveLength(viaBroker.length);
    const queued = (rows: Row[]) => rows.filter((row) => row.status === "queued").length;
    expect(queued(bulk)).toBeGreaterThan(0);
    expect(queued(bulk)).toBe(queued(viaBroker));
    for (const [seq, row] of bulk.entries()) {
      const expected = viaBroker[seq] as Row;
      // Ids and signatures are drawn anew by each fill, so which messages are rejected differs;
      // who, what, when and how big are the same, and each row settled by the same rule.
      const {
        id: _id,
        status,
        queued_at,
        delivered_at,
        acknowledged_at,
        failed_at,
        last_error,
        dead_letter_reason,
        dead_letter_detail,
        ...rest
      } = row;
      const {
        id: _i,
        status: _s,
        queued_at: _q,
        delivered_at: _d,
        acknowledged_at: _a,
        failed_at: _f,
        last_error: _l,
        dead_letter_reason: _r,
        dead_letter_detail: _t,
        ...expectedRest
      } = expected;
      expect(rest).toEqual(expectedRest);
      for (const one of [row, expected]) {
        // The broker stores a message at, or a moment after, its sender's timestamp; the bulk path at it.
        expect(one.queued_at).toBeGreaterThanOrEqual(Date.parse(one.submitted_at));
        if (expected.status === "queued") {
          expect(one).toMatchObject({ status: "queued", delivered_at: null, acknowledged_at: null });
          continue;
        }
        const rejected = settled(one.id) === "failed";
        expect(one).toMatchObject({
          status: settled(one.id),
          last_error: rejected ? REJECTED : null,
          dead_letter_reason: rejected ? "rejected" : null,
          dead_letter_detail: rejected ? REJECTED : null,
        });
        expect(one.delivered_at).toBeGreaterThanOrEqual(one.queued_at);
        expect(rejected ? one.failed_at : one.acknowledged_at).toBeGreaterThanOrEqual(
          one.delivered_at as number,
        );
      }
      expect(queued_at).toBe(Date.parse(row.submitted_at));
    }
  });
});
