/**
 * Reading a Server-Sent Events body: events split anywhere across chunks, every line ending the
 * format allows, several data lines, and one large event.
 */
import { describe, expect, it } from "vitest";
import { sseData } from "../../src/http/sse.js";

async function dataOf(chunks: string[]): Promise<string[]> {
  const encoder = new TextEncoder();
  async function* body() {
    for (const chunk of chunks) yield encoder.encode(chunk);
  }
  const events: string[] = [];
  for await (const data of sseData(body())) events.push(data);
  return events;
}

describe("sseData", () => {
  it("yields each event's data, however the chunks cut it", async () => {
    const text = 'event: x\ndata: {"a":1}\n\n: comment\n\ndata: one\ndata:two\n\nid: 3\n\ndata: {"b":2}\n\n';
    const expected = ['{"a":1}', "one\ntwo", '{"b":2}'];
    expect(await dataOf([text])).toEqual(expected);
    // Every split point, one character per chunk included.
    for (let cut = 1; cut < text.length; cut++)
      expect(await dataOf([text.slice(0, cut), text.slice(cut)]), `cut at ${cut}`).toEqual(expected);
    expect(await dataOf([...text])).toEqual(expected);
  });

  it("takes CRLF and CR line ends, a CRLF split across chunks too", async () => {
    expect(await dataOf(["data: a\r\n\r\ndata: b\r\r", "data: c\r", "\n\r", "\n"])).toEqual(["a", "b", "c"]);
  });

  it("keeps an unfinished event back and never yields it", async () => {
    expect(await dataOf(["data: done\n\ndata: half"])).toEqual(["done"]);
  });

  it("assembles one large event from many chunks", async () => {
    const chunk = "x".repeat(64 * 1024);
    const [data] = await dataOf(["data: ", ...new Array<string>(128).fill(chunk), "\n\n"]);
    expect(data?.length).toBe(128 * 64 * 1024);
  });
});
