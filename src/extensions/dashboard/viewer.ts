import type { IncomingMessage } from "node:http";
import type { GatewayContext } from "../../gateway/context.js";
import type { AgentRecord } from "../../gateway/registry.js";
import { AcpError } from "../../protocol/index.js";

/** Who is looking at the dashboard: the gateway's admin (everything) or one human principal. */
export type Viewer = { kind: "admin" } | { kind: "principal"; principalId: string };

/** Resolves the request's token to a viewer; agents' API keys do not sign in here. */
export function authenticateViewer(ctx: GatewayContext, req: IncomingMessage): Promise<Viewer> {
  return ctx.credentials.resolve(req, ["principal", "admin"]);
}

export function requireAdminViewer(viewer: Viewer): void {
  if (viewer.kind !== "admin") throw new AcpError("Forbidden", "this needs the gateway's admin token");
}

/**
 * What one viewer may see, decided on the server for every endpoint: the admin sees every agent; a
 * principal sees the agents registered with its principal id, and exchanges one of them took part in.
 */
export class Scope {
  private constructor(
    readonly viewer: Viewer,
    /** Every registered agent (revoked ones included), by id. */
    readonly all: ReadonlyMap<string, AgentRecord>,
    private readonly mine: ReadonlySet<string>,
  ) {}

  static async of(ctx: GatewayContext, viewer: Viewer): Promise<Scope> {
    const records = await ctx.registry.list();
    const all = new Map(records.map((record) => [record.agentId, record]));
    const mine = new Set(
      records
        .filter((record) => viewer.kind === "admin" || record.principalId === viewer.principalId)
        .map((record) => record.agentId),
    );
    return new Scope(viewer, all, mine);
  }

  get isAdmin(): boolean {
    return this.viewer.kind === "admin";
  }

  /** The agents this viewer owns (the admin: all of them), sorted by id. */
  agents(): AgentRecord[] {
    return [...this.mine]
      .map((id) => this.all.get(id))
      .filter((record): record is AgentRecord => record !== undefined)
      .sort((a, b) => a.agentId.localeCompare(b.agentId));
  }

  ownsAgent(agentId: string): boolean {
    return this.mine.has(agentId);
  }

  /** An exchange is visible when either side is one of the viewer's agents. */
  seesExchange(from: string, to: string): boolean {
    return this.isAdmin || this.mine.has(from) || this.mine.has(to);
  }

  /** Principal of a registered agent, or null when it is not (or no longer) known here. */
  principalOf(agentId: string): string | null {
    return this.all.get(agentId)?.principalId ?? null;
  }

  /** The viewer may act as this principal (approvals): the admin for everyone, a principal for itself. */
  actsFor(principalId: string | null): boolean {
    return (
      this.isAdmin ||
      (principalId !== null && this.viewer.kind === "principal" && this.viewer.principalId === principalId)
    );
  }

  /** How decisions made by this viewer are signed in records: `admin` or `principal:<id>`. */
  get actor(): string {
    return this.viewer.kind === "admin" ? "admin" : `principal:${this.viewer.principalId}`;
  }
}
