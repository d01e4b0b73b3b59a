import { describe } from "vitest";
import { startTestGateway } from "../helpers/gateway.js";
import { clientSuite } from "./suite.js";

describe("AcpAgent through a gateway on the embedded broker", () => {
  clientSuite((options) => startTestGateway(options));
});
