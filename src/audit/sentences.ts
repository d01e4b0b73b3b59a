import {
  clean,
  describeAnswer,
  describeFields,
  describeList,
  describeValue,
  firstString,
  isRecord,
  short,
  textOf,
} from "./describe.js";

/**
 * The summary a gateway or an agent writes when the sender gave none: one sentence a person reads
 * at a glance, naming both agents and what passed between them ("bob answered alice's
 * get-availability: 3 slots"), never an id where a name will do.
 */

/** What a summarizer may know beyond the message itself. */
export interface SummaryContext {
  /** What the answered request asked for (its action, else its method): a response's sentence names it. */
  inReplyTo?: string;
  /** A negotiation's round limit: "round 2 of 10". */
  maxRounds?: number;
  /** A vote's question, for the sentence announcing its result. */
  question?: string;
}

/** The parts of a message a sentence is made of (see `inspect` in summary.ts). */
export interface MessageView {
  method: string | undefined;
  sender: string | undefined;
  recipient: string | undefined;
  body: Record<string, unknown> | undefined;
  isResponse: boolean;
  type: string | undefined;
  error: { code: number; message: string } | undefined;
}

/**
 * What a request asked for, as the sentence of its answer names it (`SummaryContext.inReplyTo`):
 * its `action`, a handoff's task, else its method. An encrypted body shows none of these.
 */
export function requestLabel(message: unknown): string {
  const params = isRecord(message) && isRecord(message["params"]) ? message["params"] : {};
  const body = isRecord(params["body"]) ? params["body"] : {};
  const method =
    isRecord(message) && typeof message["method"] === "string" ? message["method"] : "agent.request";
  const action = textOf(body, "action");
  if (action) return action;
  if (method === "agent.handoff") {
    const title = textOf(isRecord(body["task"]) ? body["task"] : undefined, "title");
    return title ? `task "${title}"` : "task";
  }
  return method === "agent.request" ? "request" : method.replace(/^agent\./, "");
}

export function encryptedSentence(m: MessageView): string {
  const what = m.isResponse ? "response" : (m.type ?? "message");
  return `${who(m)} sent ${m.recipient ? `${m.recipient} ` : ""}an end-to-end encrypted ${what}; the payload is not shown`;
}

export function sentence(m: MessageView, context: SummaryContext = {}): string {
  const body = m.body ?? {};
  const sender = who(m);
  if (m.error) {
    return `${sender} answered ${asked(m, context)} with error ${m.error.code}: ${short(clean(m.error.message), 120)}`;
  }
  if (m.isResponse) {
    const answer = describeAnswer(body);
    return `${sender} answered ${asked(m, context)}${answer ? `: ${answer}` : ""}`;
  }
  const collaboration = COLLAB_SENTENCES[m.method ?? ""];
  if (collaboration) return collaboration(sender, m.recipient, body, context);
  const peer = m.recipient;
  switch (m.method) {
    case "agent.announce": {
      const purpose = textOf(body, "purpose", 100);
      const caps = describeList(body["capabilities"]);
      return `${sender} introduced itself${to(peer)}${purpose ? `: "${purpose}"` : ""}${caps ? `; capabilities: ${caps}` : ""}`;
    }
    case "agent.capabilities": {
      const parts = (["tools", "domains", "limits", "requests"] as const)
        .map((key) => [key, key === "limits" ? describeValue(body[key]) : describeList(body[key])] as const)
        .filter(([, text]) => text !== "")
        .map(([key, text]) => `${key} ${text}`);
      return `${sender} shared its capabilities${peer ? ` with ${peer}` : ""}${parts.length > 0 ? `: ${parts.join("; ")}` : ""}`;
    }
    case "agent.handoff":
      return handoffOffer(sender, peer, body);
    case "agent.notification": {
      const text = firstString(body, ["message", "text", "status", "event"]);
      const told = peer ? `told ${peer}` : "sent a notification";
      if (text) return `${sender} ${told}: ${short(text, 120)}`;
      const fields = describeFields(body);
      return `${sender} ${peer ? `notified ${peer}` : "sent a notification"}${fields ? ` (${fields})` : ""}`;
    }
    default: {
      const action = textOf(body, "action");
      const params = body["parameters"] ?? body["params"] ?? body["arguments"];
      if (action !== undefined) {
        const detail = isRecord(params) ? describeFields(params) : "";
        return `${sender} asked ${peer ? `${peer} ` : ""}for ${action}${detail ? ` (${detail})` : ""}`;
      }
      const fields = describeFields(body);
      const what =
        m.method === undefined ? "a message" : m.method === "agent.request" ? "a request" : m.method;
      return `${sender} sent ${peer ? `${peer} ` : ""}${what}${fields ? ` (${fields})` : ""}`;
    }
  }
}

function who(m: MessageView): string {
  return m.sender !== undefined ? short(clean(m.sender), 64) : "The sender";
}

function to(peer: string | undefined): string {
  return peer ? ` to ${peer}` : "";
}

/** "alice's get-availability", "alice's request", or "a request" when neither is known. */
function asked(m: MessageView, context: SummaryContext): string {
  const what = context.inReplyTo ? short(clean(context.inReplyTo)) : undefined;
  if (m.recipient) return `${m.recipient}'s ${what ?? "request"}`;
  return what ?? "a request";
}

function handoffOffer(sender: string, peer: string | undefined, body: Record<string, unknown>): string {
  const task = isRecord(body["task"]) ? body["task"] : undefined;
  const title = textOf(task, "title", 80);
  const escrow = typeof task?.["escrow"] === "number" && task["escrow"] > 0 ? task["escrow"] : 0;
  const parts = [
    `completed ${describeValue(body["completed"]) || "nothing stated"}`,
    `remaining ${describeValue(body["remaining"]) || "nothing stated"}`,
  ];
  const what = `a task${title ? ` "${title}"` : ""}${escrow > 0 ? ` with ${escrow} credits in escrow` : ""}`;
  return `${sender} handed ${peer ? `${peer} ` : ""}${what}: ${parts.join("; ")}`;
}

type CollabSentence = (
  sender: string,
  peer: string | undefined,
  body: Record<string, unknown>,
  context: SummaryContext,
) => string;

function round(body: Record<string, unknown>, context: SummaryContext): string {
  const n = typeof body["round"] === "number" ? body["round"] : undefined;
  if (n === undefined) return "";
  return ` (round ${n}${context.maxRounds ? ` of ${context.maxRounds}` : ""})`;
}

/** Terms as `price 80, quantity 2`. */
function terms(body: Record<string, unknown>): string {
  return isRecord(body["terms"]) ? describeFields(body["terms"], " ") : "";
}

const theirs = (peer: string | undefined) => (peer ? `${peer}'s` : "the");

function withReason(body: Record<string, unknown>): string {
  const reason = textOf(body, "reason", 120);
  return reason ? `: ${reason}` : "";
}

/** The collaboration methods (src/collab/messages.ts), recognised by name. */
const COLLAB_SENTENCES: Record<string, CollabSentence> = {
  "agent.negotiation.propose": (sender, peer, body, context) => {
    const subject = textOf(body, "subject", 80);
    const offered = terms(body);
    const what = [subject ? `"${subject}"` : "", peer ? `to ${peer}` : ""].filter(Boolean).join(" ");
    return `${sender} proposed${what ? ` ${what}` : ""}${offered ? `: ${offered}` : ""}${round(body, context)}`;
  },
  "agent.negotiation.counter": (sender, _peer, body, context) => {
    const offered = terms(body);
    return `${sender} countered${offered ? ` with ${offered}` : ""}${round(body, context)}`;
  },
  "agent.negotiation.accept": (sender, peer, body, context) =>
    `${sender} accepted ${theirs(peer)} offer${round(body, context)}; both have signed the agreement`,
  "agent.negotiation.reject": (sender, peer, body) =>
    `${sender} rejected the negotiation${peer ? ` with ${peer}` : ""}${withReason(body)}`,
  "agent.handoff.accept": (sender, peer) => `${sender} accepted ${theirs(peer)} task`,
  "agent.handoff.decline": (sender, peer, body) =>
    `${sender} declined ${theirs(peer)} task${withReason(body)}`,
  "agent.handoff.complete": (sender, peer) => `${sender} completed ${theirs(peer)} task`,
  "agent.handoff.fail": (sender, peer, body) => `${sender} failed ${theirs(peer)} task${withReason(body)}`,
  "agent.handoff.cancel": (sender, peer, body) =>
    `${sender} cancelled the task it handed${peer ? ` to ${peer}` : ""}${withReason(body)}`,
  "agent.handoff.progress": (sender, peer, body) => {
    const progress = typeof body["progress"] === "number" ? ` ${body["progress"]}% done` : "";
    const note = textOf(body, "note", 120);
    return `${sender} reported ${theirs(peer)} task${progress}${note ? `: ${note}` : ""}`;
  },
  "agent.vote.open": (sender, _peer, body) => {
    const question = textOf(body, "question", 120);
    const options = describeList(body["options"]);
    const closes = textOf(body, "closesAt");
    return `${sender} opened the vote${question ? ` '${question}'` : ""}${options ? ` (${options})` : ""}${closes ? ` until ${closes}` : ""}`;
  },
  "agent.vote.result": (_sender, _peer, body, context) => {
    const result = isRecord(body["result"]) ? body["result"] : {};
    const name = context.question ? short(clean(context.question), 120) : textOf(body, "voteId");
    const tally = isRecord(result["tally"]) ? describeFields(result["tally"], " ") : "";
    const outcome =
      result["outcome"] === "undecided"
        ? "; undecided"
        : result["outcome"] === "no-quorum"
          ? "; no quorum"
          : "";
    return `the vote${name ? ` '${name}'` : ""} closed${tally ? `: ${tally}` : ""}${outcome}`;
  },
  "agent.team.message": (sender, _peer, body) => {
    const where = [textOf(body, "teamId"), textOf(body, "channel")].filter(Boolean).join("/");
    const text = textOf(body, "text", 120);
    return `${sender} posted${where ? ` in ${where}` : ""}${text ? `: ${text}` : ""}`;
  },
  "agent.status": (sender, _peer, body) => {
    const state = textOf(body, "state");
    return `${sender} published its status${state ? `: ${state}` : ""}`;
  },
  "agent.knowledge.publish": (sender, _peer, body) => {
    const title = textOf(body, "title", 100);
    const team = textOf(body, "teamId");
    return `${sender} published${title ? ` "${title}"` : " an entry"}${team ? ` to the knowledge of ${team}` : ""}`;
  },
  "agent.dispute.open": (sender, _peer, body) => {
    const subject = isRecord(body["subject"]) ? body["subject"] : undefined;
    const about = textOf(subject, "kind");
    const statement = textOf(body, "statement", 120);
    return `${sender} opened a dispute${about ? ` about a ${about}` : ""}${statement ? `: ${statement}` : ""}`;
  },
};
