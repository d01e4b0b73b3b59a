/**
 * Built-in example agents served by `acp mcp serve --demo`: small, deterministic, and each showing
 * one way to stream (`echo` streams nothing and lets the server send the output as one delta,
 * `count` appends to an array, `summarize-text` streams a string).
 */
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import { AgentRegistry, type AgentRegistryOptions } from "./agent-source.js";

export function createDemoAgents(options: AgentRegistryOptions = {}): AgentRegistry {
  return new AgentRegistry(options)
    .agent(
      "echo",
      {
        description: "Returns its input text unchanged",
        input: z.object({ text: z.string() }),
        output: z.object({ text: z.string() }),
      },
      async ({ text }) => ({ text }),
    )
    .agent(
      "count",
      {
        description: "Counts from 1 to `to`, streaming each number after `delayMs`",
        input: z.object({
          to: z.number().int().min(1).max(100_000),
          delayMs: z.number().int().min(0).max(60_000).default(100),
        }),
        output: z.object({ numbers: z.array(z.number().int()) }),
      },
      async ({ to, delayMs }, { signal, emit }) => {
        const numbers: number[] = [];
        for (let n = 1; n <= to; n++) {
          await sleep(delayMs, undefined, { signal });
          numbers.push(n);
          await emit({ numbers: [null, n] }); // `[null, x]` appends x, whether the array is empty or not
        }
        return { numbers };
      },
    )
    .agent(
      "summarize-text",
      {
        description: "Extractive summary: the sentences whose words are most frequent in the text, streamed",
        input: z.object({
          text: z.string().min(1),
          maxSentences: z.number().int().min(1).max(50).default(2),
        }),
        output: z.object({ summary: z.string(), sentences: z.number().int() }),
      },
      async ({ text, maxSentences }, { signal, emit }) => {
        const chosen = summarize(text, maxSentences);
        const summary = chosen.join(" ");
        for (const word of summary.split(/(?<= )/)) {
          signal.throwIfAborted();
          await emit({ summary: word });
        }
        return { summary, sentences: chosen.length };
      },
    );
}

/** Picks the `max` sentences with the highest mean word frequency, kept in their original order. */
export function summarize(text: string, max: number): string[] {
  const sentences =
    text
      .match(/[^.!?]+[.!?]*/g)
      ?.map((s) => s.trim())
      .filter((s) => s.length > 0) ?? [];
  const wordsOf = (sentence: string) => sentence.toLowerCase().match(/\p{L}[\p{L}\p{N}'-]*/gu) ?? [];
  const frequency = new Map<string, number>();
  for (const sentence of sentences) {
    for (const word of wordsOf(sentence)) frequency.set(word, (frequency.get(word) ?? 0) + 1);
  }
  const scored = sentences.map((sentence, index) => {
    const words = wordsOf(sentence);
    const total = words.reduce((sum, word) => sum + (frequency.get(word) ?? 0), 0);
    return { sentence, index, score: words.length === 0 ? 0 : total / words.length };
  });
  return scored
    .sort((a, b) => b.score - a.score || a.index - b.index)
    .slice(0, max)
    .sort((a, b) => a.index - b.index)
    .map((entry) => entry.sentence);
}
