import { describe } from "vitest";
import { negotiationAcrossTheLink } from "./suite-negotiation.js";

describe("federation: a negotiation across two organizations", () => {
  negotiationAcrossTheLink("embedded");
});
