#!/usr/bin/env node
// Thin launcher: the CLI is written in TypeScript and compiled to dist/ by `npm install` (prepare).
// Loading it takes about a second (node-llama-cpp and friends). A Ctrl-C or SIGTERM in that second
// must end bench the way it ends once running, exit 2 with one line, not by the signal's default
// death; the CLI's own handlers (harness/cli/exit-code.ts) remove this one when they take over.
const whileLoading = (signal) => {
  process.stderr.write(`bench: stopped by ${signal} while starting (exit 2)\n`);
  process.exit(2);
};
whileLoading.benchWhileLoading = true;
process.on("SIGINT", whileLoading);
process.on("SIGTERM", whileLoading);
await import("../dist/harness/cli/main.js");
