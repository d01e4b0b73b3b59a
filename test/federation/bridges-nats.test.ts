import { describeWithNats } from "../helpers/nats.js";
import { bridgesAcrossTheLink } from "./suite-bridges.js";

describeWithNats(
  "federation: A2A and MCP callers reaching an agent of another organization, each gateway on its own NATS",
  () => {
    bridgesAcrossTheLink("nats");
  },
);
