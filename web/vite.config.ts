import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

/**
 * The dashboard's single page, bundled into the package's `dist/web/` (served by the gateway at `/`).
 * Everything is local: no CDN, no web fonts, no third-party requests.
 */
export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "./",
  logLevel: "warn",
  build: {
    outDir: fileURLToPath(new URL("../dist/web", import.meta.url)),
    emptyOutDir: true,
    target: "es2022",
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
});
