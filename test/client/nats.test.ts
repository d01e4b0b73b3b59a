import { startTestGateway } from "../helpers/gateway.js";
import { describeWithNats, type NatsServer, useNatsServer } from "../helpers/nats.js";
import { clientSuite } from "./suite.js";

const startNats = useNatsServer();

describeWithNats("AcpAgent through a gateway on NATS JetStream", () => {
  // A fresh nats-server per gateway, except that a restart (same dataDir) reuses the one it had.
  const serverOf = new Map<string, NatsServer>();
  clientSuite(async (options = {}) => {
    const key = options.dataDir;
    const server = (key && serverOf.get(key)) || (await startNats());
    if (key) serverOf.set(key, server);
    return startTestGateway({ ...options, natsUrl: server.url });
  });
});
