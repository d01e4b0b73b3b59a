import type { TrustLedger } from "../identity/index.js";
import type { AnnounceBody, CapabilitiesBody, PrivateIdentity } from "../protocol/index.js";
import type { AgentAudit } from "./audit.js";
import type { AgentConnection } from "./connection.js";
import type { HandshakeStore } from "./handshake-store.js";
import type { GatewayHealth } from "./health.js";
import type { DeliveryLedger } from "./ledger.js";
import type {
  AgentDirectory,
  AgentEvents,
  HandoffHandler,
  NotificationHandler,
  RequestHandler,
} from "./types.js";

export type Emit = <K extends keyof AgentEvents>(event: K, ...args: Parameters<AgentEvents[K]>) => void;

export interface Handlers {
  byMethod: Map<string, RequestHandler>;
  anyRequest: RequestHandler | undefined;
  handoff: HandoffHandler | undefined;
  notifications: NotificationHandler[];
}

export interface AgentCoreSettings {
  layers: number[];
  announce: AnnounceBody;
  capabilities: CapabilitiesBody;
  replayWindowMs: number;
  undeclaredLayers: "decline" | "maximum-caution";
  consume: "all" | "replies";
  /** Handlers running at once (`flow.concurrency`). */
  concurrency: number;
  /** How long a message from a peer this agent lost its handshake with waits for a new one. */
  handshakeWaitMs: number;
}

/** What an AgentCore is built from: its identity and settings, and the services it uses. */
export interface AgentCoreDeps {
  identity: PrivateIdentity;
  settings: AgentCoreSettings;
  /** The gateway's REST API: peers' keys, presence. */
  http: AgentDirectory;
  connection: AgentConnection;
  trust: TrustLedger;
  /** Omitted when the agent keeps no audit log. */
  audit: AgentAudit | undefined;
  /** Where completed handshakes are kept across restarts; omitted with `state: false`. */
  handshakeStore: HandshakeStore | undefined;
  ledger: DeliveryLedger;
  handlers: Handlers;
  emit: Emit;
  /** Where failures at the gateway that the SDK works around go, instead of `error`. */
  health: GatewayHealth;
}
