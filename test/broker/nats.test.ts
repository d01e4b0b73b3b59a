import { openBroker } from "../../src/broker/index.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { brokerConformance } from "./conformance.js";

const startNats = useNatsServer();

describeWithNats("NATS broker", () => {
  brokerConformance("NATS JetStream", async () => {
    const server = await startNats();
    const store = { nats: { servers: server.url } };
    return { open: (options) => openBroker({ ...options, ...store }), store };
  });
});
