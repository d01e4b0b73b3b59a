/**
 * The modules that enforce trust and delivery, each with the tests that are its own. `npm run
 * mutate` mutates one module at a time and runs only those tests against each mutant, so a module
 * takes minutes on a 2-core machine (docs/testing.md).
 */
export const mutationModules = {
  "handshake-gate": {
    mutate: ["src/gateway/handshake-gate.ts"],
    tests: ["test/gateway/handshake-gate.test.ts"],
  },
  "signature-verifier": {
    mutate: ["src/gateway/signature-verifier.ts", "src/protocol/jws.ts"],
    tests: ["test/gateway/signature-verifier.test.ts", "test/protocol/jws.test.ts"],
    // Many of its mutants leave a verify unanswered: waiting 20 s for each would take hours.
    timeoutMS: 5_000,
  },
  relay: {
    mutate: ["src/gateway/relay.ts"],
    tests: ["test/gateway/embedded.test.ts"],
  },
  "embedded-broker": {
    mutate: ["src/broker/embedded/messages.ts", "src/broker/embedded/inbox.ts"],
    tests: ["test/broker/embedded.test.ts"],
  },
  "nats-broker": {
    mutate: ["src/broker/nats/submission.ts", "src/broker/nats/inbox.ts", "src/broker/nats/settlement.ts"],
    tests: ["test/broker/nats.test.ts"],
  },
  "sdk-inbound": {
    mutate: ["src/client/inbound.ts"],
    tests: ["test/client/embedded.test.ts", "test/security/lying-gateway.test.ts"],
  },
  "sdk-ledger": {
    mutate: ["src/client/ledger.ts", "src/client/handled-log.ts"],
    tests: [
      "test/client/ledger.test.ts",
      "test/client/handled-store.test.ts",
      "test/client/handled-log.test.ts",
    ],
  },
};
