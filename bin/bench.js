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
// --cpu-variant NAME (or BENCH_CPU_VARIANT) runs llama.cpp under that ggml CPU library in this
// process and every one it starts; it must take effect before anything imports node-llama-cpp,
// so it is taken off the command line here (harness/cpu/forced-variant.ts).
const at = process.argv.findIndex((arg) => arg === "--cpu-variant" || arg.startsWith("--cpu-variant="));
if (at !== -1) {
  const inline = process.argv[at].startsWith("--cpu-variant=");
  const name = inline ? process.argv[at].slice("--cpu-variant=".length) : process.argv[at + 1];
  process.argv.splice(at, inline ? 1 : 2);
  if (name === undefined || name === "" || name.startsWith("-")) {
    process.stderr.write("bench: error: --cpu-variant needs a ggml CPU variant name, e.g. --cpu-variant haswell (bench cpu-variants lists them)\n");
    process.exit(2);
  }
  process.env.BENCH_CPU_VARIANT = name;
}
if (process.env.BENCH_CPU_VARIANT) {
  const { forceCpuVariant, CpuVariantError } = await import("../dist/harness/cpu/forced-variant.js");
  try {
    forceCpuVariant(process.env.BENCH_CPU_VARIANT);
  } catch (error) {
    if (!(error instanceof CpuVariantError)) throw error;
    process.stderr.write(`bench: error: ${error.message}\n`);
    process.exit(2);
  }
}
await import("../dist/harness/cli/main.js");
