import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { z } from "zod";
import { readTextIfExists, writeFileAtomic } from "../../coordination/fs-atomic.js";
import { AgentResponse, type OrchestrationConfig, ResponseCache } from "../../orchestration/index.js";

const CacheFileSchema = z.array(
  z.object({ key: z.string(), response: AgentResponse, expiresAt: z.number() }),
);

/**
 * The CLI's response cache, kept on disk between `acp command` runs (each run is a new process, so
 * an in-memory cache would never answer a repeat): `./.acp/command-cache/<agent-id>.json`, readable
 * by its owner only (cached answers may hold data). Unreadable content is treated as empty.
 */
export class CommandCacheFile {
  readonly cache: ResponseCache;

  private constructor(
    private readonly file: string,
    config: OrchestrationConfig,
  ) {
    this.cache = new ResponseCache(config.performance.cache_ttl * 1000);
  }

  static async open(agentId: string, config: OrchestrationConfig, dir = ".acp/command-cache") {
    const store = new CommandCacheFile(join(resolve(dir), `${agentId}.json`), config);
    const text = await readTextIfExists(store.file);
    if (text !== undefined) {
      // A damaged cache only costs misses; it is rewritten on save.
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      const checked = CacheFileSchema.safeParse(parsed);
      if (checked.success) store.cache.restore(checked.data);
    }
    return store;
  }

  async save(): Promise<void> {
    const entries = this.cache.snapshot();
    const existing = await readTextIfExists(this.file);
    if (entries.length === 0 && existing === undefined) return;
    await mkdir(resolve(this.file, ".."), { recursive: true, mode: 0o700 });
    await writeFileAtomic(this.file, `${JSON.stringify(entries)}\n`, 0o600);
  }
}
