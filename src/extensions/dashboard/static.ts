import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import type { ServerResponse } from "node:http";
import { extname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Router } from "../../http/server.js";

/**
 * The dashboard's web bundle is built by Vite into `dist/web/` (next to the compiled server code, so
 * the published package carries it). Run from source (tests), the built copy under `dist/` is used.
 * The `acp` binary's chunks (dist/bin/chunks/, scripts/bundle-cli.mjs) sit two levels below `dist/`
 * as this module does, so the first candidate holds for them too.
 */
export function defaultStaticDir(): string | undefined {
  const candidates = [new URL("../../web/", import.meta.url), new URL("../../../dist/web/", import.meta.url)];
  return candidates.map((url) => fileURLToPath(url)).find((dir) => existsSync(join(dir, "index.html")));
}

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".woff2": "font/woff2",
  ".map": "application/json; charset=utf-8",
};

/** Only our own files: no inline scripts, no third-party origins, no framing. */
const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
};

const ASSET_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

const NOT_BUILT = `<!doctype html><html lang="en"><meta charset="utf-8"><title>ACP dashboard</title>
<h1>The dashboard is not built</h1><p>Build it with <code>npm run build</code> (Vite bundles <code>web/</code> into <code>dist/web/</code>), then restart the gateway. The API under <code>/api/v1/dashboard/</code> works without it.</p></html>`;

/** `GET /` (the single page) and `GET /assets/<file>` (hashed, immutable bundles). */
export function staticRoutes(router: Router, dir: string | undefined): void {
  const cache = new Map<string, Buffer>();
  const load = async (path: string): Promise<Buffer | undefined> => {
    const cached = cache.get(path);
    if (cached) return cached;
    const content = await readFile(path).catch(() => undefined);
    if (content) cache.set(path, content);
    return content;
  };
  const send = (
    res: ServerResponse,
    status: number,
    type: string,
    body: Buffer | string,
    cacheControl: string,
  ) => {
    res.writeHead(status, {
      "content-type": type,
      "content-length": Buffer.byteLength(body),
      "cache-control": cacheControl,
      ...SECURITY_HEADERS,
    });
    res.end(body);
  };

  router.add("GET", "/", async (_req, res) => {
    const page = dir ? await load(join(dir, "index.html")) : undefined;
    if (!page) send(res, 503, TYPES[".html"] as string, NOT_BUILT, "no-store");
    else send(res, 200, TYPES[".html"] as string, page, "no-cache");
  });

  router.add("GET", "/assets/:file", async (_req, res, { file }) => {
    const name = file ?? "";
    const type = TYPES[extname(name)];
    const content = dir && type && ASSET_NAME.test(name) ? await load(join(dir, "assets", name)) : undefined;
    if (!content || !type) send(res, 404, "text/plain; charset=utf-8", "not found", "no-store");
    else send(res, 200, type, content, "public, max-age=31536000, immutable");
  });
}
