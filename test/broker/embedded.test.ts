import { openBroker } from "../../src/broker/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { brokerConformance } from "./conformance.js";

const tmp = useTmpDir("acp-broker-");

brokerConformance("embedded (SQLite)", async () => {
  const data = tmp();
  return { open: (options) => openBroker({ ...options, data }), store: { data } };
});
