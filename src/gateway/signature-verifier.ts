import { type KeyObject, verify as edVerify } from "node:crypto";
import { Worker } from "node:worker_threads";
import type { AcpMessage, KeyResolver } from "../protocol/index.js";
import { prepareSignatureCheck, type SignatureCheck, signatureMismatch } from "../protocol/jws.js";

/**
 * The verify thread: verifies each batch it is sent and answers with one byte per signature
 * (1 valid, 0 not, 2 the key could not be used). Inline source, so it runs the same from `src` and `dist`.
 */
const VERIFY_THREAD = `
const { parentPort } = require("node:worker_threads");
const { createPublicKey, verify } = require("node:crypto");
const keys = new Map();
function keyOf(der) {
  const id = der.toString("base64");
  let key = keys.get(id);
  if (key === undefined) {
    if (keys.size >= 4096) keys.clear();
    key = createPublicKey({ key: der, format: "der", type: "spki" });
    keys.set(id, key);
  }
  return key;
}
parentPort.on("message", ({ batch, bytes, offsets }) => {
  const buffer = Buffer.from(bytes);
  const results = new Uint8Array(offsets.length / 4);
  for (let i = 0; i < results.length; i++) {
    const keyAt = offsets[i * 4], dataAt = offsets[i * 4 + 1], sigAt = offsets[i * 4 + 2], end = offsets[i * 4 + 3];
    try {
      const key = keyOf(buffer.subarray(keyAt, dataAt));
      results[i] = verify(null, buffer.subarray(dataAt, sigAt), key, buffer.subarray(sigAt, end)) ? 1 : 0;
    } catch {
      results[i] = 2;
    }
  }
  parentPort.postMessage({ batch, results }, [results.buffer]);
});
`;

/**
 * A batch leaves as soon as it holds this many verifies, without waiting for the end of the turn:
 * the thread then verifies while the event loop is still reading the rest of the turn's frames,
 * instead of both working in turns. Measured with 64 messages in flight (`npm run bench -- gateway`,
 * 3 pairs): 4 and 8 both raise msgs/s by ~10% at the same CPU per message; 8 halves the hand-offs.
 */
const BATCH_LEAVES_AT = 8;

const unusableKey = (kid: string) => new Error(`the registered key ${kid} cannot verify Ed25519 signatures`);

interface PendingVerify {
  check: SignatureCheck;
  resolve: (kid: string) => void;
  reject: (error: unknown) => void;
}

/**
 * Verifies message signatures (`verifyMessageSignature`'s checks) with the Ed25519 verifies on one
 * thread of their own. The verifies asked for in one turn of the event loop leave in batches of up to
 * `BATCH_LEAVES_AT` (the rest at the end of the turn), one message each way: a thread-pool verify per
 * message cost the event loop ~25-70 µs of hand-off each, a batch of 2 or more ~13-25 µs per
 * signature. A verify alone in its turn runs here, at the end of the turn: the event loop has
 * nothing else to do then, and any hand-off would cost more CPU and latency than the verify itself.
 * Everything before the verify (JWS form, key lookup, signed bytes) runs here and rejects the same
 * way; the thread starts on first use.
 */
export class SignatureVerifier {
  private worker: Worker | undefined;
  private pending: PendingVerify[] = [];
  private scheduled = false;
  private readonly inFlight = new Map<number, PendingVerify[]>();
  private nextBatch = 0;
  /** Each registered key's SPKI DER, exported once (the registry caches its KeyObjects). */
  private readonly keyBytes = new WeakMap<KeyObject, Buffer>();
  private drained: (() => void) | undefined;
  private closed = false;

  /** Resolves to the key id that signed `message`; rejects with the AcpError a bad signature gets. */
  verify(message: AcpMessage, resolveKey: KeyResolver): Promise<string> {
    if (this.closed) return Promise.reject(new Error("the signature verifier is closed"));
    let check: SignatureCheck;
    try {
      check = prepareSignatureCheck(message, resolveKey);
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise((resolve, reject) => {
      this.pending.push({ check, resolve, reject });
      if (this.pending.length >= BATCH_LEAVES_AT) {
        this.post(this.pending);
        this.pending = [];
        return;
      }
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** Lets the verifies asked for so far finish, then stops the thread. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.pending.length > 0 || this.inFlight.size > 0) {
      await new Promise<void>((resolve) => (this.drained = resolve));
    }
    await this.worker?.terminate();
    this.worker = undefined;
  }

  private flush(): void {
    this.scheduled = false;
    const batch = this.pending;
    this.pending = [];
    if (batch.length === 0) return;
    if (batch.length === 1) {
      this.verifyHere(batch[0]!);
      this.idle();
      return;
    }
    this.post(batch);
  }

  /** Sends `batch` to the verify thread. */
  private post(batch: PendingVerify[]): void {
    let size = 0;
    for (const { check } of batch)
      size += this.derOf(check.key).length + check.data.length + check.sig.length;
    // One transferred buffer (no copy on the way) holding every key, signed input and signature.
    const bytes = Buffer.allocUnsafeSlow(size);
    const offsets: number[] = [];
    let at = 0;
    for (const { check } of batch) {
      offsets.push(at);
      at += this.derOf(check.key).copy(bytes, at);
      offsets.push(at);
      at += check.data.copy(bytes, at);
      offsets.push(at);
      at += check.sig.copy(bytes, at);
      offsets.push(at);
    }
    const id = this.nextBatch++;
    this.inFlight.set(id, batch);
    const worker = this.thread();
    if (this.inFlight.size === 1) worker.ref();
    worker.postMessage({ batch: id, bytes: bytes.buffer, offsets }, [bytes.buffer]);
  }

  /**
   * Verifies on the event loop. Measured against the thread pool with one message in flight
   * (`npm run bench -- gateway`, 4 pairs): the round trip's p50 0.81-1.11 → 0.63-0.79 ms and its
   * gateway CPU 861-1,025 → 680-757 µs; HTTP submits, often alone in their turn, lost no rate.
   */
  private verifyHere({ check, resolve, reject }: PendingVerify): void {
    try {
      if (edVerify(null, check.data, check.key, check.sig)) resolve(check.kid);
      else reject(signatureMismatch());
    } catch {
      reject(unusableKey(check.kid));
    }
  }

  private settle(id: number, results: Uint8Array): void {
    const batch = this.inFlight.get(id);
    if (!batch) return;
    this.inFlight.delete(id);
    batch.forEach(({ check, resolve, reject }, i) => {
      if (results[i] === 1) resolve(check.kid);
      else if (results[i] === 0) reject(signatureMismatch());
      else reject(unusableKey(check.kid));
    });
    this.idle();
  }

  /** A thread that died fails what it had; the next batch starts a new one. */
  private failAll(worker: Worker, error: Error): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    for (const batch of this.inFlight.values()) for (const { reject } of batch) reject(error);
    this.inFlight.clear();
    this.idle();
  }

  private idle(): void {
    if (this.inFlight.size > 0) return;
    // Nothing in flight: the thread must not keep the process alive.
    this.worker?.unref();
    if (this.pending.length === 0) this.drained?.();
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    // No inherited execArgv: a parent started with `--input-type=module -e` would make the
    // source an ES module, where `require` does not exist.
    const worker = new Worker(VERIFY_THREAD, { eval: true, execArgv: [] });
    worker.on("message", ({ batch, results }: { batch: number; results: Uint8Array }) =>
      this.settle(batch, results),
    );
    worker.on("error", (err) => this.failAll(worker, err));
    worker.on("exit", (code) => this.failAll(worker, new Error(`the verify thread exited (code ${code})`)));
    this.worker = worker;
    return worker;
  }

  private derOf(key: KeyObject): Buffer {
    let der = this.keyBytes.get(key);
    if (!der) {
      der = key.export({ format: "der", type: "spki" });
      this.keyBytes.set(key, der);
    }
    return der;
  }
}
