import { describeWithNats } from "../helpers/nats.js";
import { negotiationAcrossTheLink } from "./suite-negotiation.js";

describeWithNats("federation: a negotiation across two organizations, each gateway on its own NATS", () => {
  negotiationAcrossTheLink("nats");
});
