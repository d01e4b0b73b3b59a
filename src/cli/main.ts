#!/usr/bin/env node
import { endQuietlyWhenOutputCloses } from "./io.js";
import { runCli } from "./program.js";

endQuietlyWhenOutputCloses();
await runCli(process.argv);
