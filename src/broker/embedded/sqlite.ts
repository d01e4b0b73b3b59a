/**
 * The part of better-sqlite3 the embedded broker uses, as structural types that better-sqlite3's
 * Database and Statement satisfy. The broker's declarations reach the package's public types
 * (EmbeddedBroker's fields, openDatabase), and better-sqlite3's own types come from
 * @types/better-sqlite3, a devDependency: naming them there would fail a consumer's `tsc`.
 */
export interface SqliteRunResult {
  changes: number;
  lastInsertRowid: number | bigint;
}

export interface SqliteStatement<Params extends unknown[] = unknown[], Row = unknown> {
  run(...params: Params): SqliteRunResult;
  get(...params: Params): Row | undefined;
  all(...params: Params): Row[];
}

export interface SqliteDatabase {
  /** The database file's path. */
  readonly name: string;
  prepare<Params extends unknown[] = unknown[], Row = unknown>(source: string): SqliteStatement<Params, Row>;
  exec(source: string): unknown;
  pragma(source: string): unknown;
  /** Wraps `fn` so that each call runs in one transaction (committed, or rolled back if it throws). */
  transaction<T>(fn: () => T): () => T;
  close(): unknown;
}
