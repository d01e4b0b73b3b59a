/**
 * What a week of traffic looks like, as a deterministic stream of events in time order (a seeded
 * generator, so every run and both brokers see the same week). 1,000 agents of 100 principals; each
 * agent talks to a few peers; a pair's first exchange starts with the four-step handshake. Requests
 * are answered a moment later (a few with an error, a few never), some messages are notifications
 * or handoffs, some request/response pairs are end-to-end encrypted, and envelope sizes spread from
 * a few hundred bytes to several kilobytes.
 */

export const AGENTS = 1000;
export const AGENTS_PER_PRINCIPAL = 10;
/** Each agent talks to up to 8 peers; fewer in a small store, so handshakes stay about 1% of it. */
const peersPerAgent = (total: number) => Math.max(1, Math.min(8, Math.round(total / 250_000)));
export const WEEK_MS = 7 * 24 * 3_600_000;

export const agentId = (index: number) => `agent-${String(index).padStart(3, "0")}`;
export const principalOf = (index: number) =>
  `principal-${String(Math.floor(index / AGENTS_PER_PRINCIPAL)).padStart(2, "0")}`;

export type PlannedEvent =
  | { kind: "handshake"; at: number; from: number; to: number; step: "announce" | "capabilities" }
  | { kind: "request"; at: number; from: number; to: number; ref: number; encrypted: boolean; bytes: number }
  | { kind: "response"; at: number; ref: number; error: boolean }
  | { kind: "notification"; at: number; from: number; to: number; bytes: number }
  | { kind: "handoff"; at: number; from: number; to: number; ref: number; bytes: number };

/** mulberry32: a small, fast, seeded PRNG (uniform in [0, 1)). */
export function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Target envelope size: most a few hundred bytes to a kilobyte, some larger, a few several KB. */
function envelopeBytes(rand: () => number): number {
  const r = rand();
  if (r < 0.6) return 450 + Math.floor(rand() * 550);
  if (r < 0.92) return 1000 + Math.floor(rand() * 1200);
  return 2200 + Math.floor(rand() * 6000);
}

/** A min-heap of responses due, by time. */
class DueResponses {
  private readonly items: { at: number; ref: number; error: boolean }[] = [];
  get size(): number {
    return this.items.length;
  }
  peek() {
    return this.items[0];
  }
  push(item: { at: number; ref: number; error: boolean }): void {
    const items = this.items;
    items.push(item);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (items[parent]!.at <= items[i]!.at) break;
      [items[parent], items[i]] = [items[i]!, items[parent]!];
      i = parent;
    }
  }
  pop() {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length > 0 && last) {
      items[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < items.length && items[l]!.at < items[m]!.at) m = l;
        if (r < items.length && items[r]!.at < items[m]!.at) m = r;
        if (m === i) break;
        [items[m], items[i]] = [items[i]!, items[m]!];
        i = m;
      }
    }
    return top;
  }
}

/**
 * `total` events (messages) spread evenly over [start, start + span), in time order. Handshakes
 * come first for each new pair; responses follow their request by 0.2-5 s.
 */
export function* planWeek(total: number, start: number, span: number, seed = 7): Generator<PlannedEvent> {
  const rand = random(seed);
  const peerCount = peersPerAgent(total);
  const peers = Array.from({ length: AGENTS }, (_, agent) =>
    Array.from(
      { length: peerCount },
      (_, k) => (agent + 1 + ((k * 97 + agent * 13) % (AGENTS - 1))) % AGENTS,
    ),
  );
  const handshaken = new Set<number>();
  const due = new DueResponses();
  const step = span / total;
  let clock = start;
  let emitted = 0;
  let nextRef = 0;
  const pending: PlannedEvent[] = [];
  while (emitted < total) {
    // Each message takes the next moment of the week; a pair's handshake comes before its first message.
    clock += step * (0.5 + rand());
    emitted++;
    const handshake = pending.shift();
    if (handshake) {
      yield { ...handshake, at: clock };
      continue;
    }
    const first = due.peek();
    if (first && first.at <= clock) {
      due.pop();
      yield { kind: "response", at: clock, ref: first.ref, error: first.error };
      continue;
    }
    const from = Math.floor(rand() * AGENTS);
    const to = peers[from]![Math.floor(rand() * peerCount)]!;
    const pair = Math.min(from, to) * AGENTS + Math.max(from, to);
    if (!handshaken.has(pair)) {
      handshaken.add(pair);
      pending.push(
        { kind: "handshake", at: clock, from: to, to: from, step: "announce" },
        { kind: "handshake", at: clock, from, to, step: "capabilities" },
        { kind: "handshake", at: clock, from: to, to: from, step: "capabilities" },
      );
      yield { kind: "handshake", at: clock, from, to, step: "announce" };
      continue;
    }
    const r = rand();
    const bytes = envelopeBytes(rand);
    if (r < 0.86) {
      const ref = nextRef++;
      const answered = rand();
      // 2% never answered; 3% of the answers are errors.
      if (answered >= 0.02) due.push({ at: clock + 200 + rand() * 4800, ref, error: answered < 0.05 });
      yield { kind: "request", at: clock, from, to, ref, encrypted: rand() < 0.05, bytes };
    } else if (r < 0.98) {
      yield { kind: "notification", at: clock, from, to, bytes };
    } else {
      const ref = nextRef++;
      due.push({ at: clock + 500 + rand() * 4500, ref, error: false });
      yield { kind: "handoff", at: clock, from, to, ref, bytes };
    }
  }
}
