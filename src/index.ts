/**
 * acp-kit: the Agent Communication Protocol toolkit. The root export is the protocol core; every
 * module has its own subpath (`acp-kit/client`, `acp-kit/gateway`, `acp-kit/broker`, …).
 */
export * from "./protocol/index.js";
