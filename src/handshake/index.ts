/**
 * `acp-kit/handshake`: the four-step handshake (announce, verify, capabilities, trust) two agents
 * complete before substantive messages flow, as a state machine that does no I/O.
 */
/** The four steps of a handshake, as a peer's events and its audit entries name them. */
export type { HandshakeStep } from "../audit/entry.js";
export {
  commonLayers,
  type HandshakeEvent,
  type HandshakeOptions,
  type HandshakeState,
  Handshakes,
  type PeerHandshake,
} from "./handshake.js";
