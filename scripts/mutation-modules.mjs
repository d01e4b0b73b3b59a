/**
 * The modules that enforce trust and delivery, each with the tests that are its own. `npm run
 * mutate` mutates one module at a time and runs only those tests against each mutant, so a module
 * takes minutes on a 2-core machine (docs/testing.md). `testNames`, when given, narrows the files'
 * tests to those whose names match it (a regular expression).
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
  // The relay and the checks it hands its trust decisions to (who a message must say sent it, where
  // it goes: addressing.ts up to the bridges' helpers). Its tests are the gateway suite on the
  // embedded broker and the files that replay one relay check each, not every test that submits.
  // test/security/quotas.test.ts (one test spawns the built CLI, which mutation runs do not build)
  // and the federation tests (they fail in the single test process Stryker runs) are left out:
  // relay.test.ts drives the relay's part of those paths (handshake size, storage floor, arrivals).
  relay: {
    mutate: ["src/gateway/relay.ts", "src/gateway/sender-binding.ts", "src/gateway/addressing.ts:1-94"],
    tests: [
      "test/gateway/relay.test.ts",
      "test/gateway/embedded.test.ts",
      "test/gateway/versions.test.ts",
      "test/security/principal-binding.test.ts",
    ],
    timeoutMS: 10_000,
  },
  // The conformance suite on SQLite, the inbox's and the message table's own tests, and the
  // retention sweep and record purge that the table's batches serve (embedded-aged.test.ts).
  "embedded-broker": {
    mutate: ["src/broker/embedded/messages.ts", "src/broker/embedded/inbox.ts"],
    tests: [
      "test/broker/embedded-inbox.test.ts",
      "test/broker/embedded-messages.test.ts",
      "test/broker/embedded.test.ts",
      "test/broker/embedded-aged.test.ts",
    ],
  },
  // Every broker test submits and settles: these are the ones about dedupe and acknowledgement
  // (`testNames`, a pattern of test names within the files), not the whole NATS suite per mutant.
  "nats-broker": {
    mutate: ["src/broker/nats/submission.ts", "src/broker/nats/inbox.ts", "src/broker/nats/settlement.ts"],
    tests: [
      "test/broker/nats.test.ts",
      "test/broker/nats-operations.test.ts",
      "test/broker/nats-exactly-once.test.ts",
      "test/broker/nats-inbox-prepare.test.ts",
      "test/broker/nats-routed-hold.test.ts",
      "test/broker/nats-routed.test.ts",
      "test/broker/nats-inbox-lifecycle.test.ts",
    ],
    testNames: [
      "persists the message as queued",
      "reports a second submit of the same id",
      "gives every sender its own ids",
      "rejects malformed input",
      "acknowledges with timestamps",
      "lets only the recipient acknowledge",
      "redelivers an unacknowledged message",
      "restarts a delivery's ack wait",
      "rejects with a reason",
      "gives unacknowledged deliveries back",
      "duplicate window",
      "relays between two gateways",
      "gives deliveries back at once",
      "refusing larger envelopes",
      // What a stored message carries besides: its priority, reply route and counted bytes.
      "highest priority first",
      "routes an answer to its request's reply route",
      "refuses past a recipient's pending messages",
      "a routed delivery given back goes to the queue",
      // nats-exactly-once.test.ts: what JetStream's dedupe leaves to the submit…
      "inside the window is stored once",
      "stopped before its status record",
      "wrote its record before the submit",
      "payload limit from the server",
      "not an ACP message on an agent's subject",
      "ends a dead-lettered message at JetStream",
      // …and settling through the ack subject of another gateway's delivery.
      "holding gateway's",
      "at either gateway",
      "last allowed delivery's end",
      "refuses working\\(\\) from another agent",
      // Of the inbox's paths: ack wait from the take, after a close, expiry, dead letters, a close
      // under way, give-back while open, routes.
      "starts a delivery's ack wait when it is taken",
      "keeps the ack-wait schedule after a close",
      "expires messages after the retention period",
      "dead-letters after maxDeliver deliveries",
      "opens again while the previous inbox is still closing",
      "gives one consumer's hand-outs back while the inbox stays open",
      "routes notifications about a request there too",
      "delivers an answer like any other when its route has no receiver here",
      // nats-inbox-prepare.test.ts: what a delivery finds in its status record (all of its tests).
      "what a delivery finds in its status record",
      // …and a give-back after working(): uncounted unless the oldest.
      "working\\(\\) then a close",
      // nats-routed-hold.test.ts: a routed message held in the queue, working() and ack on it.
      "a message its route holds",
      // nats-routed.test.ts and the conformance suite: what a route gives back together, oldest first.
      "routed deliveries given back",
      // One open inbox per agent and broker (a second open while the first is not closing is refused).
      "allows one open inbox per agent per broker",
      // nats-inbox-lifecycle.test.ts, all of it: the backlog at open, leaving the loop, a consumer
      // deleted under the inbox, the drain at close, working() after a close and at another gateway.
      "NATS inbox lifecycle",
    ].join("|"),
  },
  // Its own tests drive it through a gateway the test plays at the socket (milliseconds each): the
  // checks it makes, and how it settles, orders and dedupes deliveries. The gateway-backed tests
  // of the same paths (test/security/lying-gateway.test.ts, test/client/suite-*.ts) take seconds
  // each and are left to the suite.
  "sdk-inbound": {
    mutate: ["src/client/inbound.ts"],
    tests: [
      "test/client/inbound-checks.test.ts",
      "test/client/inbound-delivery.test.ts",
      "test/client/inbound-exchanges.test.ts",
    ],
    timeoutMS: 5_000,
    // Each of these tests takes milliseconds: a mutant that loses a settle fails its test (and the
    // pair's closing hook) in 5 s instead of the suite's 30 s and 60 s.
    testTimeoutMs: 5_000,
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
