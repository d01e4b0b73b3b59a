import { jetstream } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { headers, type NatsConnection } from "@nats-io/transport-node";
import type { SubmitInput } from "../../src/broker/index.js";
import { Header, inboxSubject, pairIndexSubject, STATUS_BUCKET } from "../../src/broker/nats/layout.js";
import { messageKey, refKey } from "../../src/broker/validation.js";

/**
 * One message as a broker wrote it before the index shards and the slimmer records: the envelope
 * with an `Acp-From` header, one index entry by pair in `ACP_INDEX` (with a Nats-Msg-Id), and a
 * status record carrying everything, queued or acknowledged. The streams and the bucket exist.
 */
export async function writeEarlierMessage(
  nc: NatsConnection,
  input: SubmitInput,
  settled: "queued" | "acknowledged" = "queued",
): Promise<void> {
  const js = jetstream(nc);
  const queuedAt = Date.now();
  const h = headers();
  h.set("Nats-Msg-Id", refKey(input));
  h.set(Header.From, input.from);
  h.set(Header.Kind, input.kind);
  h.set(Header.Method, input.method);
  h.set(Header.SubmittedAt, input.submittedAt);
  h.set(Header.QueuedAt, String(queuedAt));
  const { seq } = await js.publish(inboxSubject(input.to), input.envelope, { headers: h });
  const { id, from, to, kind, method, submittedAt } = input;
  const entry = { id, from, to, kind, method, submittedAt, queuedAt };
  const index = await js.publish(pairIndexSubject(from, to), JSON.stringify(entry), { msgID: refKey(input) });
  const record = { ...entry, status: "queued", attempts: 0, seq, indexSeq: index.seq };
  const kv = await new Kvm(nc).open(STATUS_BUCKET);
  await kv.create(
    messageKey(input),
    JSON.stringify(
      settled === "queued"
        ? record
        : {
            ...record,
            status: "acknowledged",
            attempts: 1,
            deliveredAt: queuedAt + 1,
            acknowledgedAt: queuedAt + 2,
            ackSubject: `$JS.ACK.ACP_INBOX.acp-inbox-${to}.1.${seq}.1.${queuedAt}000000.0`,
            holder: "a-gateway-gone-since",
          },
    ),
  );
}
