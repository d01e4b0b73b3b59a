#!/usr/bin/env node
import { runFastPath } from "./fast-path.js";
import { endQuietlyWhenOutputCloses } from "./io.js";

endQuietlyWhenOutputCloses();
// The full CLI (commander and the dispatch table) loads only for what the fast path leaves to it.
if (!(await runFastPath(process.argv))) await (await import("./program.js")).runCli(process.argv);
