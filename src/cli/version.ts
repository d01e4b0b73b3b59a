import { existsSync, readFileSync } from "node:fs";

/**
 * The installed package's version: the nearest package.json above this module. That is two levels
 * up from src/cli, dist/cli and the bundled binary (dist/bin), three from the benchmarks' build
 * (.bench-build/src/cli).
 */
export function packageVersion(): string {
  for (let dir = new URL("../", import.meta.url); ; dir = new URL("../", dir)) {
    const file = new URL("package.json", dir);
    if (existsSync(file)) return (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
    if (dir.pathname === "/") throw new Error(`no package.json above ${import.meta.url}`);
  }
}
