/**
 * The HTTP side of an A2A JSON-RPC answer: the A2A SDK's transport handler gives either one
 * response or an async stream of them, and this writes it as JSON or as Server-Sent Events.
 */
import type { ServerResponse } from "node:http";
import { formatSSEEvent, SSE_HEADERS } from "@a2a-js/sdk";
import type { LegacyJsonRpcTransportHandler } from "@a2a-js/sdk/compat/v0_3/server";
import type { JsonRpcTransportHandler } from "@a2a-js/sdk/server";
import { sendJson } from "../../../http/server.js";
import type { A2ACall } from "../json-rpc.js";

type JsonRpcAnswer = Awaited<ReturnType<JsonRpcTransportHandler["handle"]>>;

/** Writes the SDK's answer: one JSON-RPC response, or a stream of them as Server-Sent Events. */
export async function writeAnswer(
  res: ServerResponse,
  id: A2ACall["id"],
  mapError: (err: unknown) => unknown,
  pending: Promise<JsonRpcAnswer | Awaited<ReturnType<LegacyJsonRpcTransportHandler["handle"]>>>,
): Promise<void> {
  const answer = await pending;
  if (!(Symbol.asyncIterator in answer)) {
    if (!res.writableEnded) sendJson(res, 200, answer);
    return;
  }
  // Errors before the first event (task not found…) are a plain JSON-RPC answer, not a stream.
  let next: IteratorResult<unknown>;
  try {
    next = await answer.next();
  } catch (err) {
    if (!res.writableEnded) sendJson(res, 200, { jsonrpc: "2.0", id, error: mapError(err) });
    return;
  }
  res.writeHead(200, SSE_HEADERS);
  res.on("close", () => void answer.return(undefined));
  try {
    for (; !next.done && !res.writableEnded; next = await answer.next())
      res.write(formatSSEEvent(next.value));
  } catch (err) {
    if (!res.writableEnded) res.write(formatSSEEvent({ jsonrpc: "2.0", id, error: mapError(err) }));
  } finally {
    res.end();
  }
}
