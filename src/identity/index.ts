export {
  KeyFileError,
  readIdentityFile,
  readPublicIdentity,
  writeIdentityFile,
} from "./files.js";
export {
  initialTrust,
  type TrustBasis,
  TrustLedger,
  trustLevel,
  type TrustLevel,
  type TrustObservation,
  type TrustPolicy,
  type TrustRecord,
} from "./trust.js";
