/** `acp-kit/broker`: the message broker behind the gateway (embedded SQLite or NATS JetStream). */
export { EmbeddedBroker } from "./embedded/broker.js";
export { DATABASE_FILE, DEFAULT_DATA_DIR } from "./embedded/database.js";
export {
  BrokerError,
  type BrokerErrorCode,
  type BrokerErrorKind,
  brokerToAcp,
  isBrokerError,
  isWriteConflict,
  QUOTA_RETRY_AFTER_SECONDS,
} from "./errors.js";
export { NatsBroker } from "./nats/broker.js";
export {
  consumerName,
  INBOX_STREAM,
  INDEX_STREAM,
  inboxSubject,
  STATUS_BUCKET,
  USER_BUCKET_PREFIX,
} from "./nats/layout.js";
export { openBroker } from "./open.js";
export { ackWaitFor } from "./policy.js";
export * from "./types.js";
