import { restRecord } from "../wire/deprecated-names.js";
import type { AddPeerRequest, FederationStatusAnswer, PeerAnswer } from "../wire/federation.js";
import { FEDERATION_API } from "../wire/federation.js";
import { normaliseGatewayUrl } from "./http.js";
import { requestGatewayJson } from "./request.js";

/**
 * A federating gateway's peers over HTTP, with its admin token (docs/federation.md, "Operating
 * it"). Non-2xx answers become the AcpError the gateway sent. Answers are snake_case with the
 * deprecated camelCase names beside them, an older gateway's camelCase answers read the same way.
 */
export class FederationAdminClient {
  private readonly baseUrl: string;

  constructor(private readonly options: { gateway: string; adminToken: string }) {
    this.baseUrl = normaliseGatewayUrl(options.gateway);
  }

  /** This gateway's domain, endpoint, policy and keys, and every peer with its link's health. */
  status(): Promise<FederationStatusAnswer> {
    return this.call("GET", "") as Promise<FederationStatusAnswer>;
  }

  /** Every admitted peer gateway, with its pinned keys and its link's health. */
  async list(): Promise<PeerAnswer[]> {
    return ((await this.call("GET", "/peers")) as { peers: PeerAnswer[] }).peers;
  }

  /** Admits a peer; its keys are those given, or those its `/.well-known/acp` shows now. */
  add(peer: AddPeerRequest): Promise<PeerAnswer & { warning?: string }> {
    return this.call("POST", "/peers", peer) as Promise<PeerAnswer & { warning?: string }>;
  }

  /** Forgets a peer (messages already queued for it stay until they expire). */
  remove(domain: string): Promise<{ domain: string; removed: true }> {
    return this.call("DELETE", `/peers/${encodeURIComponent(domain)}`) as Promise<{
      domain: string;
      removed: true;
    }>;
  }

  /** Refuses the peer in both directions whatever the policy, keeping its record (`unblock` lifts it). */
  block(domain: string): Promise<PeerAnswer> {
    return this.call("POST", `/peers/${encodeURIComponent(domain)}/block`) as Promise<PeerAnswer>;
  }

  /** Lifts a block set by `block`. */
  unblock(domain: string): Promise<PeerAnswer> {
    return this.call("POST", `/peers/${encodeURIComponent(domain)}/unblock`) as Promise<PeerAnswer>;
  }

  /** Pins the keys the peer's `/.well-known/acp` now shows, in place of those pinned. */
  acceptKey(domain: string): Promise<PeerAnswer> {
    return this.call("POST", `/peers/${encodeURIComponent(domain)}/accept-key`) as Promise<PeerAnswer>;
  }

  private async call(method: string, path: string, body?: unknown): Promise<unknown> {
    const answer = await requestGatewayJson(this.baseUrl, method, `${FEDERATION_API}${path}`, {
      headers: { authorization: `Bearer ${this.options.adminToken}` },
      ...(body !== undefined ? { body } : {}),
    });
    return restRecord(answer);
  }
}
