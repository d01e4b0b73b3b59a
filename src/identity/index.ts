export * from "./files.js";
export * from "./trust.js";
