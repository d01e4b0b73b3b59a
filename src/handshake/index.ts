export * from "./handshake.js";
