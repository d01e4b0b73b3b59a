import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { messageKind, validateMessage } from "../../src/protocol/index.js";

const doc = readFileSync(new URL("../../docs/protocol.md", import.meta.url), "utf8");
const signatures = JSON.parse(
  readFileSync(new URL("../vectors/signatures.json", import.meta.url), "utf8"),
) as {
  cases: {
    name: string;
    canonical: string;
    protectedHeader: string;
    signingInput: string;
    signature: string;
  }[];
};

/** The JSON-RPC messages shown in the spec's ```json blocks. */
const examples = [...doc.matchAll(/```json\n([\s\S]*?)\n```/g)]
  .map((m) => JSON.parse(m[1] ?? "null") as Record<string, unknown>)
  .filter((value) => value.jsonrpc !== undefined);

describe("docs/protocol.md", () => {
  it("shows one example of each message kind", () => {
    const methods = examples.map((m) => m.method ?? ("result" in m ? "response" : "error"));
    expect(methods).toEqual([
      "agent.request",
      "response",
      "agent.notification",
      "agent.handoff",
      "agent.announce",
      "agent.capabilities",
      "error",
    ]);
  });

  it("every example message is valid (its shortened signature aside)", () => {
    for (const { signature: _shortened, ...example } of examples) {
      expect(["request", "response", "notification", "handoff", "error"]).toContain(
        messageKind(validateMessage(example)),
      );
    }
  });

  it("the worked signing example is the request vector, byte for byte", () => {
    const request = signatures.cases.find((c) => c.name === "request");
    expect(request).toBeDefined();
    for (const text of [
      request?.protectedHeader,
      request?.canonical,
      request?.signingInput,
      request?.signature,
    ]) {
      expect(doc).toContain(`\`\`\`text\n${text}\n\`\`\``);
    }
  });
});
