/**
 * Sends A2A push notifications through the gateway's outbound URL policy (http/outbound.ts), in
 * place of the SDK's DefaultPushNotificationSender, which fetches any URL a client registered
 * (following redirects) and prints each URL to stdout. Here a push URL must resolve to an address
 * the policy allows, the connection goes to the address it checked, a redirect is refused, and
 * outcomes go to the gateway's logger, the URL without its query (where receivers put secrets).
 * Otherwise as the SDK's: the body in the wire version the config was registered with, the config's
 * `authentication` as the Authorization header (else its `token` as X-A2A-Notification-Token), one
 * task's notifications in order.
 */
import type { StreamResponse, Task, TaskPushNotificationConfig } from "@a2a-js/sdk";
import { V03PushNotificationSerializer } from "@a2a-js/sdk/compat/v0_3/server";
import {
  type PushNotificationSender,
  type PushNotificationSerializer,
  type ServerCallContext,
  V1PushNotificationSerializer,
} from "@a2a-js/sdk/server";
import type { GatewayContext } from "../../../gateway/context.js";
import { displayUrl } from "../../../http/outbound.js";
import type { KvPushNotificationStore } from "./durable-stores.js";

const TOKEN_HEADER = "X-A2A-Notification-Token";

export class GatewayPushSender implements PushNotificationSender {
  readonly #chains = new Map<string, Promise<void>>();
  readonly #serializers: Record<string, PushNotificationSerializer> = {
    "1.0": new V1PushNotificationSerializer(),
    "0.3": new V03PushNotificationSerializer(),
  };

  constructor(
    private readonly ctx: GatewayContext,
    private readonly store: KvPushNotificationStore,
    private readonly timeoutMs: number,
  ) {}

  send(event: StreamResponse, context: ServerCallContext, task?: Task): Promise<void> {
    const taskId = taskIdOf(event);
    if (!taskId) return Promise.resolve();
    const previous = this.#chains.get(taskId) ?? Promise.resolve();
    const next = previous.then(async () => {
      const configs = await this.store.loadWithMetadata(taskId, context);
      await Promise.all(
        configs.map(({ config, wireVersion }) => this.#post(config, wireVersion, event, task)),
      );
    });
    const settled = next.catch((err: unknown) =>
      this.ctx.logger.warn({ err: (err as Error).message, taskId }, "A2A: reading push configs failed"),
    );
    this.#chains.set(taskId, settled);
    return settled.finally(() => {
      if (this.#chains.get(taskId) === settled) this.#chains.delete(taskId);
    });
  }

  async #post(
    config: TaskPushNotificationConfig,
    wireVersion: string,
    event: StreamResponse,
    task: Task | undefined,
  ): Promise<void> {
    const url = displayUrl(config.url);
    const serializer =
      this.#serializers[wireVersion] ?? (this.#serializers["1.0"] as PushNotificationSerializer);
    try {
      const { body, contentType } = serializer.serialize(event, task);
      const response = await this.ctx.outbound.fetch(config.url, {
        method: "POST",
        headers: { "content-type": contentType, ...authHeaders(config) },
        body,
        signal: AbortSignal.timeout(this.timeoutMs),
        maxResponseBytes: 64 * 1024,
      });
      await response.body?.cancel();
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      this.ctx.logger.debug({ taskId: config.taskId, url }, "A2A push notification sent");
    } catch (err) {
      const error = err as Error & { address?: string };
      this.ctx.logger.warn(
        { taskId: config.taskId, url, err: error.message, ...(error.address && { address: error.address }) },
        "A2A push notification not sent",
      );
    }
  }
}

function authHeaders(config: TaskPushNotificationConfig): Record<string, string> {
  const { scheme, credentials } = config.authentication ?? {};
  if (scheme && credentials) return { authorization: `${scheme} ${credentials}` };
  return config.token ? { [TOKEN_HEADER]: config.token } : {};
}

function taskIdOf(event: StreamResponse): string | undefined {
  const payload = event.payload;
  switch (payload?.$case) {
    case "task":
      return payload.value.id;
    case "statusUpdate":
    case "artifactUpdate":
    case "message":
      return payload.value.taskId || undefined;
    default:
      return undefined;
  }
}
