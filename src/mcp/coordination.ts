/**
 * A coordination session (the coordination protocol, `src/coordination`) as MCP resources, so agents
 * subscribe to it instead of polling coordination.json:
 * - `coordination://{session}`: coordination.json and the session's artifacts;
 * - `coordination://{session}/events`: the event log (messages.jsonl), most recent last;
 * - `coordination://{session}/reports`: the agents' reports.
 * Each is subscribable: `Session.watch` sees the files change and the subscriber gets
 * `notifications/resources/updated` with the URI whose content changed.
 *
 * The client is remote: a file that cannot be read is named relative to the session with a generic
 * reason (`publicProblem`), never with its content, its size or a path on the server.
 */
import { readdir } from "node:fs/promises";
import { resolve } from "node:path";
import { type McpServer, ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import { ErrorCode, McpError, type ReadResourceResult } from "@modelcontextprotocol/sdk/types.js";
import { formatPublicProblem, type PublicProblem, publicProblem } from "../coordination/errors.js";
import { type Coordination, Session, type SessionChange, type WatchOptions } from "../coordination/index.js";
import { SESSION_ID_PATTERN } from "../coordination/schemas.js";
import type { ResourceSubscriptions } from "./subscriptions.js";

export const COORDINATION_SCHEME = "coordination";

export interface CoordinationResourcesOptions {
  /** The context root holding session directories. */
  root: string;
  /** Whether this client may see a session (the gateway: sessions its agent takes part in). Default: all. */
  visible?: (coordination: Coordination) => boolean;
  /** How `Session.watch` notices changes (polling period…). */
  watch?: WatchOptions;
  /** Events `…/events` returns, the most recent ones (default 500). */
  maxEvents?: number;
}

type Part = "" | "/events" | "/reports";

/** Which part of a session each kind of file change shows in. */
const PART_OF_CHANGE: Record<SessionChange, Part> = {
  coordination: "",
  data: "",
  events: "/events",
  reports: "/reports",
};

const URI = /^coordination:\/\/([0-9a-f-]{36})(\/events|\/reports)?$/;

export function addCoordinationResources(
  server: McpServer,
  subscriptions: ResourceSubscriptions,
  options: CoordinationResourcesOptions,
): void {
  const maxEvents = options.maxEvents ?? 500;
  /** Reads from the session, turning a failure into what a remote client may see. */
  const guarded = async <T>(id: string, read: () => Promise<T>): Promise<T> => {
    try {
      return await read();
    } catch (err) {
      if (err instanceof McpError) throw err;
      const problem = publicProblem(err, resolve(options.root, id));
      throw new McpError(ErrorCode.InternalError, `session ${id}: ${formatPublicProblem(problem)}`, problem);
    }
  };
  const open = async (id: string): Promise<Session> => {
    const missing = new McpError(ErrorCode.InvalidParams, `no coordination session ${id}`);
    if (!SESSION_ID_PATTERN.test(id)) throw missing;
    const session = await Session.open({ root: options.root, id }).catch(() => {
      throw missing;
    });
    if (options.visible) {
      const coordination = await guarded(id, () => session.readCoordination());
      if (!options.visible(coordination)) throw missing;
    }
    return session;
  };
  const json = (uri: URL | string, value: unknown): ReadResourceResult => ({
    contents: [{ uri: String(uri), mimeType: "application/json", text: JSON.stringify(value, null, 2) }],
  });

  server.registerResource(
    "coordination-session",
    new ResourceTemplate(`${COORDINATION_SCHEME}://{session}`, {
      list: async () => ({
        resources: (await listSessions(options)).map((c) => ({
          uri: `${COORDINATION_SCHEME}://${c.session_id}`,
          name: `coordination session ${c.session_id}`,
          description: `${Object.keys(c.agents).length} agents${c.project_type ? `, ${c.project_type}` : ""}, started ${c.started_at}`,
          mimeType: "application/json",
        })),
      }),
    }),
    {
      description:
        "A coordination session: coordination.json (agents, statuses, dependencies) and its artifacts",
      mimeType: "application/json",
    },
    async (uri, variables) => {
      const id = String(variables.session);
      const session = await open(id);
      const [coordination, artifacts] = await guarded(id, () =>
        Promise.all([session.readCoordination(), session.listArtifacts()]),
      );
      return json(uri, { coordination, artifacts });
    },
  );
  server.registerResource(
    "coordination-events",
    new ResourceTemplate(`${COORDINATION_SCHEME}://{session}/events`, { list: undefined }),
    {
      description: "The session's event log (messages.jsonl), most recent last",
      mimeType: "application/json",
    },
    async (uri, variables) => {
      const id = String(variables.session);
      const session = await open(id);
      const { events, problems } = await guarded(id, () => session.readEvents());
      return json(uri, {
        total: events.length,
        events: events.slice(-maxEvents).map((e) => e.event),
        ...(problems.length > 0 && {
          problems: problems.map(
            (p): PublicProblem => ({
              file: "messages.jsonl",
              line: p.line,
              reason: p.kind === "torn" ? "torn line" : "not a valid event",
            }),
          ),
        }),
      });
    },
  );
  server.registerResource(
    "coordination-reports",
    new ResourceTemplate(`${COORDINATION_SCHEME}://{session}/reports`, { list: undefined }),
    { description: "The agents' reports (reports/{agent}.json)", mimeType: "application/json" },
    async (uri, variables) => {
      const id = String(variables.session);
      const session = await open(id);
      // One unreadable report is named (generically) beside the others instead of hiding them all.
      const problems: PublicProblem[] = [];
      const reports = await guarded(id, () =>
        session.readReports({ onInvalid: (err) => problems.push(publicProblem(err, session.paths.dir)) }),
      );
      return json(uri, { reports, ...(problems.length > 0 && { problems }) });
    },
  );

  subscriptions.add(async (uri, onUpdated) => {
    const match = URI.exec(uri);
    if (!match) return undefined;
    const session = await open(match[1] ?? "");
    const part = (match[2] ?? "") as Part;
    const watcher = session.watch((changes) => {
      if (changes.some((change) => PART_OF_CHANGE[change] === part)) onUpdated();
    }, options.watch);
    await watcher.ready;
    return () => watcher.close();
  });
}

/** The sessions under the root this client may see, newest first; unreadable ones are skipped. */
async function listSessions(options: CoordinationResourcesOptions): Promise<Coordination[]> {
  const names = await readdir(options.root).catch(() => [] as string[]);
  const read = await Promise.all(
    names
      .filter((name) => SESSION_ID_PATTERN.test(name))
      .map(async (id) => {
        try {
          return await (await Session.open({ root: options.root, id })).readCoordination();
        } catch {
          return undefined;
        }
      }),
  );
  return read
    .filter((c): c is Coordination => c !== undefined && (options.visible?.(c) ?? true))
    .sort((a, b) => b.started_at.localeCompare(a.started_at));
}
