import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  AcpError,
  ErrorCode,
  type ErrorCodeName,
  errorCodeName,
  errorMeanings,
  errorTable,
  problemsOf,
  toErrorObject,
} from "../../src/protocol/index.js";
import { pointerToken, toPointer } from "../../src/protocol/errors.js";

const PROTOCOL_DOC = new URL("../../docs/protocol.md", import.meta.url);

/** The rows docs/protocol.md must list between its error-codes markers, from the code. */
const expectedRows = () =>
  Object.entries(errorTable).map(([name, row]) => [
    String(row.code),
    `\`${name}\``,
    String(row.status),
    row.meaning,
  ]);

/** The rows of the Markdown table in the doc, cells trimmed (the formatter pads them). */
function documentedRows(): string[][] {
  const doc = readFileSync(PROTOCOL_DOC, "utf8");
  const match = /<!-- error-codes:begin -->\n([\s\S]*?)\n<!-- error-codes:end -->/.exec(doc);
  if (!match?.[1]) throw new Error("docs/protocol.md lacks the error-codes markers");
  const rows = match[1].split("\n").map((line) =>
    line
      .split("|")
      .slice(1, -1)
      .map((cell) => cell.trim()),
  );
  expect(rows[0]).toEqual(["Code", "Reason (`data.reason`)", "HTTP", "Meaning"]);
  return rows.slice(2);
}

describe("the error code table", () => {
  it("in docs/protocol.md lists exactly the codes, names, HTTP statuses and meanings of errors.ts, in order", () => {
    expect(documentedRows()).toEqual(expectedRows());
  });

  it("uses JSON-RPC's codes and ACP's -32000..-32099 range, each code once, each with a meaning and an HTTP status", () => {
    const codes = Object.values(ErrorCode);
    expect(new Set(codes).size).toBe(codes.length);
    expect(Object.keys(ErrorCode)).toEqual(Object.keys(errorTable));
    for (const [name, row] of Object.entries(errorTable)) {
      const { code, status, meaning } = row;
      expect(
        (code >= -32099 && code <= -32000) || [-32700, -32600, -32601, -32602, -32603].includes(code),
        name,
      ).toBe(true);
      expect(ErrorCode[name as ErrorCodeName]).toBe(code);
      expect(meaning.length, name).toBeGreaterThan(10);
      expect(errorMeanings[name as ErrorCodeName]).toBe(meaning);
      // A client or server error status, and 500 only for InternalError: no code falls through to 500.
      expect(Number.isInteger(status) && status >= 400 && status <= 599, name).toBe(true);
      expect(status === 500, name).toBe(name === "InternalError");
      expect(new AcpError(name as ErrorCodeName).httpStatus).toBe(status);
      expect(errorCodeName(code)).toBe(name);
    }
    expect(errorCodeName(-1)).toBeUndefined();
  });

  it("keeps the codes the protocol documents stable", () => {
    expect(ErrorCode).toMatchObject({
      ParseError: -32700,
      InvalidRequest: -32600,
      InvalidParams: -32602,
      SignatureMissing: -32001,
      SignatureInvalid: -32002,
      UnknownKey: -32003,
      HandshakeRequired: -32004,
      Replay: -32005,
      StaleTimestamp: -32006,
      Misrouted: -32007,
      LayersDeclined: -32008,
      DecryptionFailed: -32009,
    });
  });
});

describe("AcpError", () => {
  it("is a JSON-RPC error object with a reason and the problems", () => {
    const err = new AcpError("Replay", undefined, {
      problems: [{ path: "/params/headers/message-id", message: "seen" }],
    });
    expect(err.message).toBe(errorMeanings.Replay);
    expect(err.kind).toBe("Replay");
    expect(err.reason, "the former name, kept for one deprecation period").toBe("Replay");
    expect(JSON.parse(JSON.stringify(err))).toEqual({
      code: -32005,
      message: errorMeanings.Replay,
      data: { reason: "Replay", problems: [{ path: "/params/headers/message-id", message: "seen" }] },
    });
  });

  it("anything else thrown becomes an internal error without leaking its message or stack", () => {
    expect(toErrorObject(new Error("secret path /home/x"))).toEqual({
      code: -32603,
      message: errorMeanings.InternalError,
      data: { reason: "InternalError" },
    });
    expect(toErrorObject(new AcpError("Timeout")).code).toBe(-32019);
  });
});

describe("JSON pointers (RFC 6901)", () => {
  it("escape ~ and / in tokens", () => {
    expect(pointerToken("a/b~c")).toBe("a~1b~0c");
    expect(toPointer(["params", "headers", "x/y", 0])).toBe("/params/headers/x~1y/0");
    expect(toPointer([])).toBe("");
  });
});

describe("problemsOf", () => {
  it("locates each schema issue by a JSON Pointer under the base, escaping ~ and /", () => {
    const parsed = z
      .object({ "a/b": z.string(), list: z.array(z.number()) })
      .safeParse({ "a/b": 1, list: [1, "x"] });
    expect(parsed.success).toBe(false);
    expect(problemsOf(parsed.error!, "/params/body")).toEqual([
      { path: "/params/body/a~1b", message: expect.any(String) },
      { path: "/params/body/list/1", message: expect.any(String) },
    ]);
    // A problem with the whole value is at "" (RFC 6901), not "/".
    expect(problemsOf(z.string().safeParse(1).error!)).toEqual([{ path: "", message: expect.any(String) }]);
  });

  it("takes Standard Schema issues too, whose path segments may be {key} objects", () => {
    expect(
      problemsOf([{ message: "too long", path: ["items", { key: 2 }, "name"] }, { message: "bad" }]),
    ).toEqual([
      { path: "/items/2/name", message: "too long" },
      { path: "", message: "bad" },
    ]);
  });
});
