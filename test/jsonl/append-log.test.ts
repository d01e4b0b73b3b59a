import { spawn } from "node:child_process";
import { appendFileSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { AppendLog, AppendLogError, acquireWriterLock, releaseWriterLock } from "../../src/jsonl/index.js";
import { useTmpDir } from "../helpers/tmp.js";

const APPENDER = fileURLToPath(new URL("./fixtures/appender.mjs", import.meta.url));

function runAppender(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [APPENDER, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("AppendLog: torn last line", () => {
  const tmp = useTmpDir("acp-jsonl-");

  it("single writer: moves the torn bytes aside at open, then appends on a fresh line", async () => {
    const file = join(tmp(), "log.jsonl");
    writeFileSync(file, '{"a":1}\n{"b":');
    const log = await AppendLog.single(file, { clock: () => new Date("2026-03-04T05:06:07.890Z") });
    expect(log.recovered).toEqual({ file, movedTo: `${file}.torn-2026-03-04T05-06-07-890Z`, bytes: 5 });
    await log.append('{"c":3}\n');
    await log.close();
    expect(readFileSync(file, "utf8")).toBe('{"a":1}\n{"c":3}\n');
    expect(readFileSync(`${file}.torn-2026-03-04T05-06-07-890Z`, "utf8")).toBe('{"b":');
  });

  it("shared writers: ends the torn line before appending, keeping its bytes", async () => {
    const file = join(tmp(), "log.jsonl");
    writeFileSync(file, '{"a":1}\n{"b":');
    await AppendLog.shared(file).append('{"c":3}\n');
    expect(readFileSync(file, "utf8")).toBe('{"a":1}\n{"b":\n{"c":3}\n');
    expect(readdirSync(join(file, ".."))).toEqual(["log.jsonl"]);
  });

  it("refuses text that is not whole lines, naming the file", async () => {
    const file = join(tmp(), "log.jsonl");
    const single = await AppendLog.single(file);
    await expect(single.append('{"a":1}')).rejects.toThrow(`${file}: an append must be whole lines`);
    await expect(AppendLog.shared(file).append("")).rejects.toThrow(AppendLogError);
    await single.close();
    expect(readFileSync(file, "utf8")).toBe("");
  });
});

describe("AppendLog: concurrent appends", () => {
  const tmp = useTmpDir("acp-jsonl-");

  it("single writer: appends made at once land whole and in call order", async () => {
    const file = join(tmp(), "log.jsonl");
    const log = await AppendLog.single(file, { fsync: true });
    await Promise.all(Array.from({ length: 200 }, (_, i) => log.append(`${JSON.stringify({ i })}\n`)));
    await log.close();
    const lines = readFileSync(file, "utf8").split("\n");
    expect(lines.pop()).toBe("");
    expect(lines.map((line) => JSON.parse(line).i)).toEqual(Array.from({ length: 200 }, (_, i) => i));
  });

  it.each(["shared", "shared-kept"])(
    "%s writers: four processes appending at once never interleave inside a line",
    async (mode) => {
      const file = join(tmp(), "log.jsonl");
      const writers = ["w1", "w2", "w3", "w4"];
      const results = await Promise.all(writers.map((writer) => runAppender([mode, file, writer, "300"])));
      for (const result of results) expect(result, result.stderr).toMatchObject({ code: 0 });
      const lines = readFileSync(file, "utf8").split("\n");
      expect(lines.pop()).toBe("");
      // A writer that looks at the file's end while another one's long line is half copied, and still
      // is 2 ms later (a busy machine), ends that "fragment" first: the documented cost is one blank
      // line, which every reader passes over. Anything else must be a whole line of one writer.
      const parsed = lines
        .filter((line) => line !== "")
        .map((line) => JSON.parse(line) as { writer: string; i: number });
      for (const writer of writers) {
        const own = parsed.filter((entry) => entry.writer === writer).map((entry) => entry.i);
        expect(own).toEqual(Array.from({ length: 300 }, (_, i) => i + 1));
      }
      expect(parsed).toHaveLength(1200);
    },
    60_000,
  );
});

describe("AppendLog: reopen, rewrite, failed writes", () => {
  const tmp = useTmpDir("acp-jsonl-");

  it("single writer: a closed log refuses appends; reopened, it continues the same file", async () => {
    const file = join(tmp(), "sub", "log.jsonl");
    const first = await AppendLog.single(file, { dirMode: 0o700 });
    await first.append("1\n2\n");
    await first.close();
    await expect(first.append("3\n")).rejects.toThrow("the log is closed");
    const second = await AppendLog.single(file);
    expect(second.recovered).toBeUndefined();
    await second.append("3\n");
    await second.close();
    expect(readFileSync(file, "utf8")).toBe("1\n2\n3\n");
  });

  it("rewrite: the single writer's next append goes to the new file, and so does a shared one's", async () => {
    const file = join(tmp(), "log.jsonl");
    const single = await AppendLog.single(file);
    await single.append("old 1\nold 2\n");
    await single.rewrite("kept\n");
    await single.append("after\n");
    await single.close();
    expect(readFileSync(file, "utf8")).toBe("kept\nafter\n");

    const shared = AppendLog.shared(file, { dirMode: 0o700 });
    await shared.rewrite("again\n");
    await shared.append("last\n");
    expect(readFileSync(file, "utf8")).toBe("again\nlast\n");
    expect(readdirSync(join(file, ".."))).toEqual(["log.jsonl"]);
  });

  it("shared writer, descriptor kept open: the line is written before append returns; another process's rewrite and torn line are followed", async () => {
    const file = join(tmp(), "log.jsonl");
    const kept = AppendLog.shared(file, { keepOpen: true, fsync: true, dirMode: 0o700 });
    const durable = kept.append("1\n");
    expect(readFileSync(file, "utf8")).toBe("1\n"); // nothing awaited yet
    await durable;
    await AppendLog.shared(file).rewrite("rewritten\n"); // as another process would
    await kept.append("2\n");
    expect(readFileSync(file, "utf8")).toBe("rewritten\n2\n");
    appendFileSync(file, "torn"); // a writer that died mid-line
    await kept.append("3\n");
    expect(readFileSync(file, "utf8")).toBe("rewritten\n2\ntorn\n3\n");
    await kept.close();
    await expect(kept.append("4\n")).rejects.toThrow("the log is closed");
  });

  it("single writer: a write cut short by the file size limit is cut back, and the log goes on", async () => {
    const file = join(tmp(), "log.jsonl");
    const result = await runAppender(["file-too-big", file]);
    expect(result, result.stderr).toMatchObject({ code: 0 });
    expect(JSON.parse(result.stdout)).toEqual({ failed: "EFBIG", unusable: null });
    expect(readFileSync(file, "utf8")).toBe("first\nafter\n");
  }, 30_000);

  it("writer lock: one holder per path; a stale lock from a dead process is taken over", async () => {
    const lock = join(tmp(), "writer.lock");
    await acquireWriterLock(lock, "the test log");
    await expect(acquireWriterLock(lock, "the test log")).rejects.toThrow(
      "the test log is already open for writing in this process",
    );
    await releaseWriterLock(lock);
    writeFileSync(lock, "2147483646\n");
    await acquireWriterLock(lock, "the test log");
    expect(readFileSync(lock, "utf8")).toBe(`${process.pid}\n`);
    await releaseWriterLock(lock);
  });
});
