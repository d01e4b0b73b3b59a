import { randomFillSync } from "node:crypto";

/** Random bytes drawn in blocks: one `randomFillSync` per 512 ids instead of one per id. */
const pool = Buffer.alloc(10 * 512);
let poolOffset = pool.length;

/**
 * A new message id: a UUID version 7 (RFC 9562), the current Unix time in milliseconds followed by
 * 74 random bits. Any UUID (or any id the schema allows) is accepted on the wire; time-ordered ids
 * are what this SDK sends because they arrive in roughly increasing order, so a store's index of
 * message ids (the gateway's duplicate check) grows at its end instead of dirtying a random page
 * per message.
 */
export function newMessageId(now = Date.now()): string {
  if (poolOffset === pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const bytes = Buffer.alloc(16);
  bytes.writeUIntBE(now, 0, 6);
  pool.copy(bytes, 6, poolOffset, poolOffset + 10);
  poolOffset += 10;
  bytes[6] = 0x70 | ((bytes[6] ?? 0) & 0x0f); // version 7
  bytes[8] = 0x80 | ((bytes[8] ?? 0) & 0x3f); // variant 10
  const hex = bytes.toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
