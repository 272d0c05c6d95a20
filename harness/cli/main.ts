import { Command } from "commander";
import { HARNESS_VERSION } from "../version.js";
import { runToEnd } from "./exit-code.js";

/**
 * Each command's module, loaded only when needed: together they import the whole harness (the
 * runner, llama.cpp bindings, Arrow, the server), which took about two seconds per process on a
 * 2-core machine — paid by every `bench serve` a suite starts and every CLI call a test makes.
 */
const COMMANDS: Readonly<Record<string, () => Promise<(program: Command) => void>>> = {
  run: async () => (await import("./commands/run.js")).registerRun,
  report: async () => (await import("./commands/report.js")).registerReport,
  gate: async () => (await import("./commands/gate.js")).registerGate,
  merge: async () => (await import("./commands/merge.js")).registerMerge,
  serve: async () => (await import("./commands/serve.js")).registerServe,
  load: async () => (await import("./commands/load.js")).registerLoad,
  fixtures: async () => (await import("./commands/fixtures.js")).registerFixtures,
  goldens: async () => (await import("./commands/goldens.js")).registerGoldens,
  budget: async () => (await import("./commands/budget.js")).registerBudget,
  "cpu-variants": async () => (await import("./commands/cpu-variants.js")).registerCpuVariants,
};

const program = new Command()
  .name("bench")
  .description("bringup-bench: parity and performance validation for LLM bring-ups (embedded default: llama.cpp on CPU)")
  .version(HARNESS_VERSION)
  // Taken off the command line by bin/bench.js before anything loads llama.cpp; listed here for --help.
  .option("--cpu-variant <name>", "run llama.cpp under this ggml CPU library (e.g. haswell, x64), in this process and every one it starts (bench cpu-variants lists them)")
  .showHelpAfterError("(run with --help for the options)")
  .exitOverride();

// The command named first on the line is the only one registered; anything else (help, an unknown
// command, --version) registers them all, in this order, so commander answers as it always did.
const named = process.argv[2];
const needed = named !== undefined && Object.hasOwn(COMMANDS, named) ? [named] : Object.keys(COMMANDS);
for (const register of await Promise.all(needed.map((name) => COMMANDS[name]()))) register(program);

/** Errors become one line and every ending an exit code in exit-code.ts, and only there. */
await runToEnd(() => program.parseAsync(process.argv));
