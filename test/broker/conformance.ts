/**
 * The broker conformance suite: the same tests, unchanged, for every Broker implementation.
 * Each test gets a fresh, empty store from the harness factory.
 */
import { afterEach, describe } from "vitest";
import type { Broker, CommonBrokerOptions } from "../../src/broker/index.js";
import { deliveryConformance } from "./conformance-delivery.js";
import { quotaConformance } from "./conformance-quotas.js";
import { resumeConformance } from "./conformance-resume.js";
import { routingConformance } from "./conformance-routing.js";
import { stateConformance } from "./conformance-state.js";

export interface BrokerHarness {
  /** Opens a broker on this harness's store; every call sees the same data. */
  open(options?: CommonBrokerOptions): Promise<Broker>;
  /** The `openBroker` options naming this store, for a child process opening it too. */
  readonly store: Record<string, unknown>;
}

export interface SuiteContext {
  /** A fresh store for this test. */
  harness(): Promise<BrokerHarness>;
  /** Opens a broker (default options: ackWait 5 s) and closes it after the test. */
  open(harness: BrokerHarness, options?: CommonBrokerOptions): Promise<Broker>;
}

export function brokerConformance(name: string, createHarness: () => Promise<BrokerHarness>): void {
  describe(`Broker conformance: ${name}`, () => {
    const opened: Broker[] = [];
    afterEach(async () => {
      await Promise.all(opened.splice(0).map((broker) => broker.close().catch(() => undefined)));
    });
    const context: SuiteContext = {
      harness: createHarness,
      async open(harness, options = {}) {
        const broker = await harness.open({
          ...options,
          delivery: { ackWaitMs: 5_000, ...options.delivery },
        });
        opened.push(broker);
        return broker;
      },
    };
    deliveryConformance(context);
    resumeConformance(context);
    stateConformance(context);
    quotaConformance(context);
    routingConformance(context);
  });
}
