export {
  commonLayers,
  type HandshakeEvent,
  type HandshakeOptions,
  Handshakes,
  type HandshakeState,
  type HandshakeStep,
  type PeerHandshake,
} from "./handshake.js";
