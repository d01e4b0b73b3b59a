/**
 * `acp-kit/protocol` (also the package root): what a program needs to speak ACP without a gateway.
 * Build, sign, verify, validate and encrypt messages; make and read identities; the wire types as zod
 * schemas; the error codes. Named one by one on purpose: helpers the gateway and the SDK share
 * (signature-check preparation, JSON pointers, priority ranks) stay in their module files, and
 * test/architecture/public-surface.test.ts fails when this list changes by accident.
 */
export {
  AgentAddress,
  AgentRef,
  addressOf,
  domainOf,
  FederationDomain,
  isRemoteRef,
  localPartOf,
  qualifiedPrincipal,
} from "./address.js";
export { CanonicalizationError, canonicalize } from "./canonical.js";
export { decryptBody, type EncryptFor, encryptBody, isEncryptedBody } from "./e2e.js";
export { type VerifiedEnvelope, type VerifyEnvelopeOptions, verifyEnvelope } from "./envelope.js";
export {
  AcpError,
  type AcpErrorData,
  ErrorCode,
  type ErrorCodeName,
  type ErrorCodeValue,
  type ErrorRow,
  errorCodeName,
  errorMeanings,
  errorTable,
  type IssueLike,
  type JsonRpcErrorObject,
  type Problem,
  problemsOf,
  toErrorObject,
} from "./errors.js";
export {
  createSigner,
  decodeProtectedHeader,
  type KeyResolver,
  type ProtectedHeader,
  type Signer,
  signingInput,
  signMessage,
  verifyMessageSignature,
  verifyMessageSignatureAsync,
} from "./jws.js";
export { type EarlierKey, signHandover, signingKeyAt, verifyHandover } from "./key-rotation.js";
export {
  agentOfKeyId,
  Ed25519PrivateJwk,
  Ed25519PublicJwk,
  generateIdentity,
  generatePrivateJwk,
  importPrivateKey,
  importPublicKey,
  jwkThumbprint,
  keyId,
  PrivateIdentity,
  PublicIdentity,
  parsePublicIdentity,
  publicIdentity,
  X25519PrivateJwk,
  X25519PublicJwk,
} from "./keys.js";
export {
  type BuildOptions,
  buildAnnounce,
  buildCapabilities,
  buildErrorResponse,
  buildHandoff,
  buildNotification,
  buildRequest,
  buildResponse,
  type SenderIdentity,
  TRUST_LAYER_VERSION,
} from "./message.js";
export { newMessageId } from "./message-id.js";
export { DEFAULT_PRIORITY, PRIORITIES, type Priority, parsePriority } from "./priority.js";
export { ReplayGuard, type ReplayGuardOptions } from "./replay.js";
export {
  type AcpMessage,
  AgentId,
  AnnounceBody,
  AnnounceMessage,
  CapabilitiesBody,
  CapabilitiesMessage,
  DetachedJws,
  EncryptedBody,
  EncryptedHandoffMessage,
  EnvelopeHeaders,
  ErrorObject,
  ErrorResponseMessage,
  ExtensionMethod,
  ExtensionNotificationMessage,
  ExtensionRequestMessage,
  HandoffBody,
  HandoffMessage,
  Headers,
  JsonRpcId,
  MAX_SUMMARY_HEADER_CHARS,
  MessageId,
  type MessageKind,
  MessageType,
  type MethodMessage,
  NotificationMessage,
  PlainHandoffMessage,
  PrincipalId,
  RequestMessage,
  ResponseMessage,
} from "./schemas.js";
export {
  headersOf,
  messageKind,
  parseMessageText,
  type ValidateOptions,
  validateMessage,
} from "./validate.js";
