import type { Command } from "commander";
import { FederationAdminClient } from "../../client/federation-admin.js";
import type { PeerAnswer } from "../../wire/federation.js";
import { CliError, printJson, printLine } from "../io.js";
import { failed, type GatewayFlags, gatewayOf, withGatewayOptions } from "../shared.js";

function clientOf(flags: GatewayFlags): FederationAdminClient {
  const adminToken = flags.adminToken ?? process.env.ACP_ADMIN_TOKEN;
  if (!adminToken) {
    throw new CliError(
      "this needs the gateway's admin token: pass --admin-token TOKEN or set ACP_ADMIN_TOKEN",
    );
  }
  return new FederationAdminClient({ gateway: gatewayOf(flags), adminToken });
}

/** One line per peer: domain, state, its link's health, and a key change waiting for the admin. */
function peerLine(peer: PeerAnswer): string {
  const link = peer.link;
  const parts = [peer.domain, peer.state];
  if (link) {
    parts.push(`queued ${link.queued}`);
    if (link.oldest_queued_seconds !== null) parts.push(`oldest ${link.oldest_queued_seconds}s`);
    parts.push(`last contact ${link.last_contact_at ?? "never"}`);
    const refusals = Object.entries(link.refusals);
    if (refusals.length > 0) parts.push(`refused ${refusals.map(([why, n]) => `${why}×${n}`).join(" ")}`);
    if (link.last_error) parts.push(`error: ${link.last_error}`);
  }
  if (peer.pending_keys) {
    parts.push(
      `KEY CHANGE pending since ${peer.pending_keys.seen_at} (acp federation accept-key ${peer.domain})`,
    );
  }
  return parts.join("\t");
}

/** `acp federation …`: a federating gateway's peers (admin token needed). */
export function registerFederation(program: Command): void {
  const federation = program
    .command("federation")
    .description(
      "the other organizations' gateways this gateway exchanges messages with (admin token needed)",
    );

  withGatewayOptions(
    federation
      .command("add")
      .argument("<domain>", "the peer's federation domain, e.g. b.example")
      .option("--url <url>", "where its /.well-known/acp is (default https://DOMAIN)")
      .option(
        "--key <jwk>",
        "pin this gateway key (JSON JWK with kid) instead of what its /.well-known/acp shows",
      )
      .description("admit a peer: its agents and ours may exchange messages"),
    ["admin-token"],
  ).action(async (domain: string, flags: GatewayFlags & { url?: string; key?: string }) => {
    let keys: unknown[] | undefined;
    if (flags.key !== undefined) {
      try {
        keys = [JSON.parse(flags.key)];
      } catch {
        throw new CliError(
          '--key must be a JSON Web Key, e.g. \'{"kty":"OKP","crv":"Ed25519","x":…,"kid":…}\'',
        );
      }
    }
    const added = await clientOf(flags)
      .add({ domain, ...(flags.url && { url: flags.url }), ...(keys && { keys: keys as never }) })
      .catch((err: unknown) => failed(err, flags.json));
    if (flags.json) return printJson(added);
    printLine(
      `peer ${added.domain} added; pinned keys: ${added.pinned_keys.join(", ") || "none yet (pinned at first contact)"}`,
    );
    if (added.warning) printLine(`warning: ${added.warning}`);
  });

  withGatewayOptions(federation.command("list").description("peers and their state"), ["admin-token"]).action(
    async (flags: GatewayFlags) => {
      const peers = await clientOf(flags)
        .list()
        .catch((err: unknown) => failed(err, flags.json));
      if (flags.json) return printJson({ peers });
      if (peers.length === 0) return printLine("no peers yet (acp federation add DOMAIN --url URL)");
      for (const peer of peers)
        printLine(`${peer.domain}\t${peer.state}\t${peer.url}\t${peer.pinned_keys.join(",")}`);
    },
  );

  withGatewayOptions(
    federation
      .command("status")
      .description(
        "this gateway's domain and policy; per peer: queue depth, oldest queued, last contact, refusals, a pending key change",
      ),
    ["admin-token"],
  ).action(async (flags: GatewayFlags) => {
    const status = await clientOf(flags)
      .status()
      .catch((err: unknown) => failed(err, flags.json));
    if (flags.json) return printJson(status);
    printLine(
      `domain ${status.domain} (${status.policy}), endpoint ${status.endpoint}, key ${status.keys.join(", ")}`,
    );
    if (status.peers.length === 0) printLine("no peers yet");
    for (const peer of status.peers) printLine(peerLine(peer));
  });

  const actions = [
    ["remove", "forget a peer (messages queued for it stay until they expire)", "remove"],
    ["block", "refuse a peer in both directions, whatever the policy", "block"],
    ["unblock", "allow a blocked peer again", "unblock"],
    [
      "accept-key",
      "pin the keys a peer's /.well-known/acp now shows (check them out of band first)",
      "acceptKey",
    ],
  ] as const;
  for (const [name, description, method] of actions) {
    withGatewayOptions(federation.command(name).argument("<domain>").description(description), [
      "admin-token",
    ]).action(async (domain: string, flags: GatewayFlags) => {
      const answer = await clientOf(flags)
        [method](domain)
        .catch((err: unknown) => failed(err, flags.json));
      if (flags.json) return printJson(answer);
      if ("removed" in answer) printLine(`peer ${domain} removed`);
      else printLine(peerLine(answer));
    });
  }
}
