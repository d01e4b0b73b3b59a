/**
 * The guard on push notification URLs in A2A requests: a URL the gateway would POST to is checked
 * against the gateway's outbound URL policy when it is given, not only when it is first used.
 */
import { displayUrl, type OutboundPolicy, OutboundUrlRefused } from "../../../http/outbound.js";
import { type A2ACall, A2AErrorCode, A2ARpcError } from "../json-rpc.js";

/** Where each shape of request carries a push notification URL (A2A 1.0 and 0.3). */
function pushUrlsOf(call: A2ACall): [field: string, url: unknown][] {
  const params = call.params ?? {};
  const at = (value: unknown, ...path: string[]) =>
    path.reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], value);
  switch (call.method) {
    case "SendMessage":
    case "SendStreamingMessage":
      return [
        [
          "params.configuration.taskPushNotificationConfig.url",
          at(params, "configuration", "taskPushNotificationConfig", "url"),
        ],
      ];
    case "CreateTaskPushNotificationConfig":
      return [["params.url", params.url]];
    case "message/send":
    case "message/stream":
      return [
        [
          "params.configuration.pushNotificationConfig.url",
          at(params, "configuration", "pushNotificationConfig", "url"),
        ],
      ];
    case "tasks/pushNotificationConfig/set":
      return [["params.pushNotificationConfig.url", at(params, "pushNotificationConfig", "url")]];
    default:
      return [];
  }
}

/**
 * Push URLs are where the gateway will POST: refused when given unless the outbound URL policy
 * allows them (checked again at every push, against the address then connected to).
 */
export async function refusePushUrls(call: A2ACall, outbound: OutboundPolicy): Promise<void> {
  for (const [field, url] of pushUrlsOf(call)) {
    if (typeof url !== "string") continue;
    try {
      await outbound.check(url);
    } catch (err) {
      const reason = err instanceof OutboundUrlRefused ? err.reason : `cannot be resolved (${causeOf(err)})`;
      const refused = new A2ARpcError(
        A2AErrorCode.InvalidParams,
        `push notification URL ${displayUrl(url)} ${reason}`,
        [{ field, description: reason }],
      );
      refused.requestId = call.id;
      throw refused;
    }
  }
}

function causeOf(err: unknown): string {
  return (err as NodeJS.ErrnoException).code ?? (err as Error).message;
}
