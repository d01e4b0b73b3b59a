export { attachCustody, type CustodyOptions } from "./gateway.js";
export { CUSTODY_KEY_ENV, CUSTODY_KEY_FILE, CustodyKeyError, parseKek } from "./kek.js";
export { CUSTODY_BUCKET, Custody } from "./store.js";
