import { AcpError } from "./errors.js";
import { type KeyResolver, verifyMessageSignature } from "./jws.js";
import type { ReplayGuard } from "./replay.js";
import type { AcpMessage, EnvelopeHeaders } from "./schemas.js";
import { headerPointer, headersOf, parseMessageText, validateMessage } from "./validate.js";

export interface VerifyEnvelopeOptions {
  resolveKey: KeyResolver;
  /** Timestamp window and seen-id check; omit only where another layer already does it. */
  replay?: ReplayGuard;
  /** The agent receiving it: a message addressed to anyone else is refused as misrouted. */
  expectedRecipient?: string;
}

export interface VerifiedEnvelope {
  message: AcpMessage;
  headers: EnvelopeHeaders;
  kid: string;
}

/**
 * The receive pipeline, in the order the spec mandates: validate structure and headers before any
 * processing, verify the signature, then check freshness, replay and routing. Every failure is an
 * AcpError carrying its JSON-RPC error object.
 */
export function verifyEnvelope(input: unknown, options: VerifyEnvelopeOptions): VerifiedEnvelope {
  const message = validateMessage(typeof input === "string" ? parseMessageText(input) : input, {
    envelope: true,
  });
  const kid = verifyMessageSignature(message, options.resolveKey);
  const headers = headersOf(message) as EnvelopeHeaders;
  const base = headerPointer(message);
  options.replay?.check(headers["message-id"], headers.timestamp, base);
  if (options.expectedRecipient !== undefined && headers["recipient-id"] !== options.expectedRecipient) {
    throw new AcpError(
      "Misrouted",
      `addressed to ${headers["recipient-id"]}, not ${options.expectedRecipient}`,
      {
        problems: [{ path: `${base}/recipient-id`, message: `expected ${options.expectedRecipient}` }],
      },
    );
  }
  return { message, headers, kid };
}
