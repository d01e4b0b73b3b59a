import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import type { SqliteDatabase } from "../../broker/embedded/sqlite.js";
import { EARLIER_PARTY_INDEXES, PARTY_INDEXES, PARTY_INDEXES_VERSION } from "./feed-index-schema.js";

/**
 * Gives a relay audit index made before PARTY_INDEXES its sender and recipient indexes. Building
 * them sorts every entry (11-15 s for 2 million on a busy two-core machine, and in proportion
 * beyond): at open it would hold the gateway's start that long, on the event loop every request.
 * So it runs after start, on a thread and a SQLite connection of its own, in two transactions: the
 * new indexes (and the file's version), then, once the gateway's queries take them, the old ones
 * dropped. Meanwhile the gateway's connection only reads (WAL: the build never blocks a read), over
 * the old indexes; the index follows the logs again once the thread is done. Stopped halfway (the
 * gateway stopped), the first transaction is rolled back and the next start builds again; the
 * second is redone at open.
 *
 * Inline source, so it runs the same from `src`, `dist` and the CLI's bundle; the driver is resolved
 * here and named to the thread.
 */
const BUILD_THREAD = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.file);
try {
  db.exec("BEGIN IMMEDIATE");
  db.exec(workerData.build);
  db.exec("COMMIT");
} catch (err) {
  db.close();
  throw err;
}
parentPort.postMessage("built");
parentPort.once("message", () => {
  try {
    db.exec(workerData.drop);
  } finally {
    db.close();
  }
});
`;

/** Where the index says what it does at length (the gateway's log, at info). */
export type IndexLog = (fields: Record<string, unknown>, message: string) => void;

export interface PartyIndexBuild {
  /** Resolves once the old indexes are dropped too; rejects with what failed. */
  done: Promise<void>;
  /** The gateway stops: the thread is ended (a transaction it had open is rolled back). */
  stop(): void;
}

/** Starts building the party indexes of `db`'s file; `built` is called once they are committed. */
export function buildPartyIndexes(db: SqliteDatabase, log: IndexLog, built: () => void): PartyIndexBuild {
  log(
    {},
    "relay audit index: building its sender and recipient indexes; the dashboard shows what was indexed before start until they are built",
  );
  const started = performance.now();
  const worker = new Worker(BUILD_THREAD, {
    eval: true,
    // No inherited execArgv: a parent started with `--input-type=module -e` would make the source
    // an ES module, where `require` does not exist.
    execArgv: [],
    workerData: {
      driver: createRequire(import.meta.url).resolve("better-sqlite3"),
      file: db.name,
      build: `${PARTY_INDEXES}\nPRAGMA user_version = ${PARTY_INDEXES_VERSION};`,
      drop: EARLIER_PARTY_INDEXES,
    },
  });
  // A gateway that stops does not wait for it.
  worker.unref();
  let stopped = false;
  const done = new Promise<void>((resolve, reject) => {
    worker.once("message", () => {
      if (stopped) return;
      built();
      worker.postMessage("drop");
    });
    worker.once("error", reject);
    // Ended by stop() before it ran, a thread exits with 0 too.
    worker.once("exit", (code) =>
      code === 0 && !stopped
        ? resolve()
        : reject(
            new Error(
              `the relay audit index's build thread ${stopped ? "was stopped" : `exited (code ${code})`}`,
            ),
          ),
    );
  });
  void done.then(
    () => log({ ms: Math.round(performance.now() - started) }, "relay audit index: indexes built"),
    () => undefined,
  );
  return {
    done,
    stop: () => {
      stopped = true;
      void worker.terminate();
    },
  };
}
