#!/usr/bin/env node
// Thin launcher: the CLI is written in TypeScript and compiled to dist/ by `npm install` (prepare).
// Loading it takes about a second (node-llama-cpp and friends): signals in that second end it
// with exit 2 (while-loading.js).
import { endSignalsWhileLoading } from "./while-loading.js";

endSignalsWhileLoading();
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
