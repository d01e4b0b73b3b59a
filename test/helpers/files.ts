import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

/** Every file under `dir` whose bytes contain `needle`: a secret sealed at rest appears in none. */
export function filesContaining(dir: string, needle: string): string[] {
  const found: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) found.push(...filesContaining(path, needle));
    else if (readFileSync(path).includes(needle)) found.push(path);
  }
  return found;
}
