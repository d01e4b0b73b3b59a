import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { AcpMessage } from "../protocol/index.js";

/** The two verified envelopes that prove a peer's side of a completed handshake. */
export interface PeerProof {
  announce: AcpMessage;
  capabilities: AcpMessage;
}

interface StoreFile {
  version: 1;
  peers: Record<string, PeerProof>;
}

/**
 * Completed handshakes survive a restart of the agent, as they survive one of the gateway: for
 * each established peer the agent keeps the peer's signed announce and capabilities messages
 * (`<root>/<agent-id>/handshakes.json`, mode 0600). On connect they are verified again against the
 * registry and replayed into the handshake machine, so a queue of messages that arrived while the
 * agent was down is accepted without a new handshake. A proof that no longer verifies (the peer
 * changed keys or was revoked) is dropped and the next exchange handshakes afresh.
 */
export class HandshakeStore {
  private peers: Record<string, PeerProof> = {};
  private writing: Promise<void> = Promise.resolve();
  private readonly file: string;

  constructor(root: string, agentId: string) {
    this.file = join(root, agentId, "handshakes.json");
  }

  async load(): Promise<Record<string, PeerProof>> {
    let text: string;
    try {
      text = await readFile(this.file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return {};
      throw err;
    }
    try {
      const parsed = JSON.parse(text) as StoreFile;
      this.peers = parsed.version === 1 && typeof parsed.peers === "object" ? parsed.peers : {};
    } catch {
      this.peers = {}; // unreadable state only costs a new handshake
    }
    return { ...this.peers };
  }

  save(peer: string, proof: PeerProof): Promise<void> {
    this.peers[peer] = proof;
    return this.flush();
  }

  forget(peer: string): Promise<void> {
    if (!(peer in this.peers)) return this.writing;
    delete this.peers[peer];
    return this.flush();
  }

  /** Writes are serialised and atomic (temp file + rename), so a crash leaves the old or the new file. */
  private flush(): Promise<void> {
    const snapshot: StoreFile = { version: 1, peers: { ...this.peers } };
    this.writing = this.writing
      .catch(() => undefined)
      .then(async () => {
        await mkdir(join(this.file, ".."), { recursive: true, mode: 0o700 });
        const temp = `${this.file}.${process.pid}.tmp`;
        await writeFile(temp, JSON.stringify(snapshot), { mode: 0o600 });
        await rename(temp, this.file);
      });
    return this.writing;
  }
}
