import type { Broker, KvBucket } from "../../../broker/index.js";
import { AcpError } from "../../../protocol/index.js";
import type { TaskReference } from "./convert.js";

/** Which A2A task an ACP request started (bucket `a2a-tasks`), kept for status and cancel. */
export interface TaskLink {
  agentId: string;
  /** The ACP agent that sent the request: the only one that may query or cancel the task. */
  from: string;
  messageId: string;
  taskId: string;
  contextId?: string;
  state: string;
  updatedAt: string;
}

/** KV keys allow `[A-Za-z0-9_=/.-]`; message and task ids may hold other characters. */
const keyOf = (kind: "m" | "t", id: string) => `${kind}/${Buffer.from(id).toString("base64url")}`;

export class TaskLinks {
  private readonly bucket: KvBucket<TaskLink>;

  constructor(broker: Broker) {
    this.bucket = broker.kv<TaskLink>("a2a-tasks");
  }

  async save(link: TaskLink): Promise<void> {
    await Promise.all([
      this.bucket.put(keyOf("m", link.messageId), link),
      this.bucket.put(keyOf("t", link.taskId), link),
    ]);
  }

  /** The link a requester names, refused (NotFound, never Forbidden: no probing) unless it is its own. */
  async find(agentId: string, from: string, ref: TaskReference): Promise<TaskLink> {
    const entry = ref.taskId
      ? await this.bucket.get(keyOf("t", ref.taskId))
      : await this.bucket.get(keyOf("m", ref.messageId ?? ""));
    const link = entry?.value;
    if (!link || link.from !== from || link.agentId !== agentId) {
      const field = ref.taskId ? "taskId" : "messageId";
      throw new AcpError(
        "NotFound",
        `no A2A task of yours with ${field} ${ref.taskId ?? ref.messageId} at ${agentId}`,
        {
          problems: [{ path: `/params/body/${field}`, message: "no such task of this requester" }],
        },
      );
    }
    return link;
  }
}
