import { describe } from "vitest";
import { startTestGateway } from "../helpers/gateway.js";
import { gatewaySuite } from "./suite.js";
import { gatewayLimitsSuite } from "./suite-limits.js";

describe("gateway on the embedded broker", () => {
  gatewaySuite((options) => startTestGateway(options));
});

describe("gateway limits on the embedded broker", () => {
  gatewayLimitsSuite((options) => startTestGateway(options));
});
