/**
 * A consumer's program using every subpath export of acp-kit, type-checked from the packed package
 * by test/architecture/package-types.test.ts (not part of this repository's own build: it imports
 * the package by name).
 */
import { generateIdentity, publicIdentity } from "acp-kit";
import { AuditLog, type AuditLogOptions } from "acp-kit/audit";
import { type Broker, EmbeddedBroker, NatsBroker } from "acp-kit/broker";
import { AcpAgent, type AcpAgentOptions, GatewayClient } from "acp-kit/client";
import { type HandoffView, verifyAgreement } from "acp-kit/collab";
import { Session, type SessionEvent } from "acp-kit/coordination";
import { type DashboardOptions, dashboardExtension } from "acp-kit/dashboard";
import type { Gateway, GatewayExtension } from "acp-kit/gateway";
import type { HandshakeState } from "acp-kit/handshake";
import { readIdentityFile, type TrustLevel } from "acp-kit/identity";
import { AgentsMcpServer } from "acp-kit/mcp";
import { AgentCommand } from "acp-kit/orchestration";
import { type PublicIdentity, validateMessage } from "acp-kit/protocol";
import { startDefaultGateway } from "acp-kit/server";

export async function example(): Promise<void> {
  const alpha = generateIdentity("agent-alpha", "alice");
  const shared: PublicIdentity = publicIdentity(alpha);
  const broker: Broker = EmbeddedBroker.open({ data: "./.acp" });
  const gateway: Gateway = await startDefaultGateway();
  const options: Partial<AcpAgentOptions> = { gateway: "http://127.0.0.1:8080" };
  const session = await Session.create({ root: "./context" });
  const event: SessionEvent = await session.log({ from: "alpha", type: "status", message: "started" });
  const audit: AuditLogOptions = { agent: alpha.agentId, root: "./audit" };
  const extensions: GatewayExtension[] = [dashboardExtension({} as DashboardOptions)];
  const state: HandshakeState = "established";
  const trust: TrustLevel = "baseline";
  const handoff: HandoffView | undefined = undefined;
  console.log(shared, broker, gateway, options, event, audit, extensions, state, trust, handoff);
  console.log(AuditLog, NatsBroker, AcpAgent, GatewayClient, verifyAgreement, readIdentityFile);
  console.log(AgentsMcpServer, AgentCommand, validateMessage);
}
