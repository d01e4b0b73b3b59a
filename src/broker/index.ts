/**
 * `acp-kit/broker`: the message broker behind the gateway (embedded SQLite or NATS JetStream), the
 * `Broker` interface both implement, and its errors. The NATS stream and subject layout, the
 * acknowledgement policy and the quota retry delay are the drivers' own: import them from their
 * module files inside this package.
 */
export { EmbeddedBroker } from "./embedded/broker.js";
export { DATABASE_FILE, DEFAULT_DATA_DIR } from "./embedded/database.js";
export {
  BrokerError,
  type BrokerErrorCode,
  type BrokerErrorKind,
  brokerToAcp,
  isBrokerError,
  isWriteConflict,
} from "./errors.js";
export { NatsBroker } from "./nats/broker.js";
export { openBroker } from "./open.js";
export {
  type AgentUsage,
  type Broker,
  type BrokerEvent,
  type BrokerKind,
  type BrokerHealth,
  type BrokerQuotas,
  type CommonBrokerOptions,
  type DeadLetter,
  type Delivery,
  type DeliveryOptions,
  type EmbeddedBrokerOptions,
  type Inbox,
  type InboxOptions,
  type KvBucket,
  type KvChange,
  type KvEntry,
  type ListPage,
  type ListQuery,
  MESSAGE_STATUSES,
  type MessageRecord,
  type MessageRef,
  type MessageStatus,
  type NatsBrokerOptions,
  type NatsConnectionOptions,
  type NatsTlsOptions,
  type OpenBrokerOptions,
  QUOTA_NAMES,
  type QuotaName,
  type RoutedReceiver,
  type StoredMessage,
  type SubmitInput,
  type SubmitResult,
  type Unsubscribe,
} from "./types.js";
