import { describe } from "vitest";
import { bridgesAcrossTheLink } from "./suite-bridges.js";

describe("federation: A2A and MCP callers reaching an agent of another organization", () => {
  bridgesAcrossTheLink("embedded");
});
