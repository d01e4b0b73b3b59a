import type { GatewayFactory } from "./fixtures.js";
import { deliverySuite } from "./suite-delivery.js";
import { lostStateSuite } from "./suite-lost-state.js";
import { messagingSuite } from "./suite-messaging.js";
import { resubmitSuite } from "./suite-resubmit.js";

/** Every SDK integration test, for one broker: call it inside a describe with that broker's gateway factory. */
export function clientSuite(makeGateway: GatewayFactory): void {
  messagingSuite(makeGateway);
  deliverySuite(makeGateway);
  lostStateSuite(makeGateway);
  resubmitSuite(makeGateway);
}
