export { type CustodyOptions, custodyExtension } from "./extension.js";
export { CUSTODY_KEY_ENV, CUSTODY_KEY_FILE, CustodyKeyError, parseKek } from "./kek.js";
export { CustodialResponder } from "./responder.js";
export { CUSTODY_BUCKET, Custody } from "./store.js";
export { SealOpenError, secretKeeper } from "./sealing.js";
