import { describe } from "vitest";
import { startTestGateway } from "../helpers/gateway.js";
import { communitySuite } from "./suite-community.js";
import { handoffSuite } from "./suite-handoff.js";
import { negotiationSuite } from "./suite-negotiation.js";
import { teamSuite } from "./suite-team.js";

describe("collaboration on the embedded broker", () => {
  describe("negotiation", () => negotiationSuite((options) => startTestGateway(options)));
  describe("handoff", () => handoffSuite((options) => startTestGateway(options)));
  describe("teams", () => teamSuite((options) => startTestGateway(options)));
  describe("knowledge, disputes, status", () => communitySuite((options) => startTestGateway(options)));
});
