/**
 * What "refused properly" means, from docs/gateway.md (not from the gateway's code, so the tests
 * check the gateway against its documentation): every error is
 * `{"jsonrpc":"2.0","error":{"code","message","data":{"reason",…}},"id":null}` with a code from
 * the ACP table and the HTTP status the documentation gives that code. Plus the generators that
 * build hostile input from valid input.
 */
import fc from "fast-check";
import { ErrorCode, errorCodeName } from "../../../src/protocol/index.js";

/** HTTP status per error code, as docs/gateway.md states it ("HTTP status by code"). */
export const DOCUMENTED_STATUS = new Map<number, number>([
  ...[-32700, -32600, -32602, -32001, -32006, -32007, -32015].map((code) => [code, 400] as const),
  ...[-32002, -32003, -32010].map((code) => [code, 401] as const),
  ...[-32011, -32008, -32021].map((code) => [code, 403] as const),
  ...[-32014, -32016, ErrorCode.MethodNotFound].map((code) => [code, 404] as const),
  ...[-32004, -32005, -32017].map((code) => [code, 409] as const),
  [ErrorCode.PayloadTooLarge, 413],
  [ErrorCode.RateLimited, 429],
  [ErrorCode.StorageUnavailable, 503],
]);

export interface JsonRpcError {
  code: number;
  message: string;
  data?: unknown;
}

/**
 * Why an HTTP answer to hostile input is wrong, or undefined if it is acceptable: any 5xx, or an
 * error whose body, code or status is not the documented one. `ok` lists the success statuses the
 * surface may give (a mutation can happen to produce valid input).
 */
export function badHttpAnswer(status: number, text: string, ok: number[]): string | undefined {
  if (ok.includes(status)) return undefined;
  if (status >= 500) return `answered ${status}: ${text.slice(0, 300)}`;
  let body: { jsonrpc?: unknown; error?: JsonRpcError; id?: unknown };
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    return `status ${status} with a body that is not JSON: ${text.slice(0, 200)}`;
  }
  if (body.jsonrpc !== "2.0" || body.id !== null || !body.error)
    return `not a JSON-RPC error: ${text.slice(0, 300)}`;
  return badError(body.error, status);
}

/**
 * The MCP endpoint speaks MCP's Streamable HTTP: its transport errors are the MCP SDK's JSON-RPC
 * errors (-32000 "Bad Request"/"Not Acceptable"…, -32700…-32600), its authentication errors
 * ACP's (docs/mcp.md). Wrong: any 5xx, a non-JSON-RPC body, a code outside JSON-RPC's reserved range,
 * an internal error (-32603) anywhere in the answer (the fuzzed requests are bad input, never a
 * reason for the server to fail), and a -32602 without `data.problems` naming the field at fault.
 */
export function badMcpAnswer(status: number, text: string, ok: number[]): string | undefined {
  // A handler that threw shows as -32603 inside an otherwise fine (SSE) answer.
  if (/"code":\s*-32603/.test(text)) return `internal error inside a ${status}: ${text.slice(0, 300)}`;
  const unexplained = invalidParamsWithoutProblems(text);
  if (unexplained !== undefined) return `-32602 without data.problems: ${unexplained.slice(0, 300)}`;
  if (ok.includes(status)) return undefined;
  if (status >= 500) return `answered ${status}: ${text.slice(0, 300)}`;
  try {
    const body = JSON.parse(text) as { jsonrpc?: unknown; error?: JsonRpcError };
    const code = body.error?.code;
    if (body.jsonrpc !== "2.0" || !Number.isInteger(code))
      return `not a JSON-RPC error: ${text.slice(0, 300)}`;
    if ((code as number) > -32000 || (code as number) < -32768)
      return `code ${code} outside JSON-RPC's range`;
    return code === ErrorCode.InternalError ? `internal error: ${text.slice(0, 300)}` : undefined;
  } catch {
    return `status ${status} with a body that is not JSON: ${text.slice(0, 200)}`;
  }
}

/**
 * The first -32602 error object in an MCP answer (a JSON body, or the `data:` lines of an SSE
 * stream) whose `data.problems` is not a non-empty list of `{path, message}`, as text; else undefined.
 */
export function invalidParamsWithoutProblems(text: string): string | undefined {
  const documents = /^[{[]/.test(text.trimStart())
    ? [text]
    : text.split("\n").flatMap((line) => (line.startsWith("data: ") ? [line.slice(6)] : []));
  for (const document of documents) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(document);
    } catch {
      continue; // not JSON-RPC (an endpoint event): judged elsewhere
    }
    for (const message of Array.isArray(parsed) ? parsed : [parsed]) {
      const error = (message as { error?: JsonRpcError } | null)?.error;
      if (error?.code !== ErrorCode.InvalidParams) continue;
      const problems = (error.data as { problems?: unknown } | undefined)?.problems;
      const named =
        Array.isArray(problems) &&
        problems.length > 0 &&
        problems.every(
          (p: { path?: unknown; message?: unknown }) =>
            typeof p?.path === "string" && typeof p.message === "string" && p.message.length > 0,
        );
      if (!named) return JSON.stringify(error);
    }
  }
  return undefined;
}

/** A JSON-RPC error object with an undocumented code, a wrong reason, or (given) a wrong HTTP status. */
export function badError(error: JsonRpcError, status?: number): string | undefined {
  const name = errorCodeName(error.code);
  if (!name || name === "InternalError")
    return `undocumented or internal code ${error.code}: ${error.message}`;
  if (typeof error.message !== "string" || error.message.length === 0)
    return `code ${error.code} without a message`;
  const reason = (error.data as { reason?: unknown } | undefined)?.reason;
  if (reason !== name) return `code ${error.code} carries reason ${String(reason)}`;
  const expected = DOCUMENTED_STATUS.get(error.code);
  if (status !== undefined && expected !== status) {
    return `code ${error.code} (${name}) came with HTTP ${status}, documented ${expected ?? "none"}`;
  }
  return undefined;
}

/** Every JSON path (as key arrays) inside a value. */
export function pathsOf(value: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  const paths: (string | number)[][] = [prefix];
  if (Array.isArray(value)) {
    value.forEach((item, i) => {
      paths.push(...pathsOf(item, [...prefix, i]));
    });
  } else if (typeof value === "object" && value !== null) {
    for (const [key, item] of Object.entries(value)) paths.push(...pathsOf(item, [...prefix, key]));
  }
  return paths;
}

export type Mutation =
  | { op: "replace"; path: (string | number)[]; value: unknown }
  | { op: "delete"; path: (string | number)[] }
  | { op: "add"; path: (string | number)[]; key: string; value: unknown };

/** A copy of `value` with the mutation applied. */
export function mutate(value: unknown, mutation: Mutation): unknown {
  const copy = structuredClone(value);
  const { path } = mutation;
  if (path.length === 0)
    return mutation.op === "replace" ? mutation.value : mutation.op === "delete" ? undefined : copy;
  let parent = copy as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) parent = parent[key] as Record<string | number, unknown>;
  const last = path.at(-1) as string | number;
  if (mutation.op === "replace") parent[last] = mutation.value;
  else if (mutation.op === "delete") {
    if (Array.isArray(parent)) parent.splice(Number(last), 1);
    else delete parent[last];
  } else {
    const target = parent[last];
    if (typeof target === "object" && target !== null && !Array.isArray(target)) {
      (target as Record<string, unknown>)[mutation.key] = mutation.value;
    }
  }
  return copy;
}

/** Strings a careless parser or router trips on. */
export const nastyString = fc.oneof(
  { weight: 2, arbitrary: fc.string() },
  { weight: 1, arbitrary: fc.string({ unit: "binary" }) },
  { weight: 2, arbitrary: fc.stringMatching(/^(%[0-9A-Fa-f]{0,2}|[a-z/.]){1,12}$/) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      "",
      " ",
      "%",
      "%E0%A4%A",
      "%ZZ",
      "../../etc/passwd",
      "__proto__",
      "constructor",
      "\u0000",
      "\uD800",
      "a".repeat(5000),
      "1e999",
      "-0",
      "null",
    ),
  },
);

/** JSON values including the awkward ones: huge numbers, prototype keys, nesting (deeper: `deeplyNested`). */
export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue() },
  { weight: 2, arbitrary: nastyString },
  { weight: 1, arbitrary: fc.constantFrom(null, true, 0, -1, 2 ** 53, 1e308, -1e-308, [], {}) },
  {
    weight: 1,
    // Kept shallow enough for structuredClone and JSON.stringify of the test itself; deeper is text.
    arbitrary: fc.integer({ min: 2, max: 1_000 }).map((depth) => {
      let nested: unknown = 1;
      for (let i = 0; i < depth; i++) nested = i % 2 === 0 ? [nested] : { x: nested };
      return nested;
    }),
  },
  { weight: 1, arbitrary: fc.constant(JSON.parse('{"__proto__":{"polluted":true}}') as unknown) },
);

/** JSON text nesting `depth` arrays/objects, for documents deeper than any JS value the test could build. */
export function deeplyNested(depth: number): string {
  const open = '[{"x":'.repeat(Math.ceil(depth / 2));
  const close = "}]".repeat(Math.ceil(depth / 2));
  return `${open}1${close}`;
}

/** A mutation of `base`: replace, delete or add somewhere in it. */
export function mutationOf(base: unknown): fc.Arbitrary<Mutation> {
  const paths = pathsOf(base);
  const path = fc.constantFrom(...paths);
  const inner = paths.filter((p) => p.length > 0);
  return fc.oneof(
    fc.record({ op: fc.constant("replace" as const), path, value: hostileValue }),
    fc.record({ op: fc.constant("add" as const), path, key: nastyString, value: hostileValue }),
    ...(inner.length > 0
      ? [fc.record({ op: fc.constant("delete" as const), path: fc.constantFrom(...inner) })]
      : []),
  );
}

/** Runs per surface: `ACP_FUZZ_RUNS` (≥100,000 for the long run), else a CI-sized sample. */
export const FUZZ_RUNS = Number(process.env.ACP_FUZZ_RUNS ?? 400);
