import { Command } from "commander";
import { HARNESS_VERSION } from "../version.js";
import { registerFixtures } from "./commands/fixtures.js";
import { registerGoldens } from "./commands/goldens.js";
import { registerRun } from "./commands/run.js";
import { registerReport } from "./commands/report.js";
import { registerGate } from "./commands/gate.js";
import { registerServe } from "./commands/serve.js";
import { registerLoad } from "./commands/load.js";
import { registerMerge } from "./commands/merge.js";
import { runToEnd } from "./exit-code.js";

const program = new Command()
  .name("bench")
  .description("bringup-bench: parity and performance validation for LLM bring-ups (embedded default: llama.cpp on CPU)")
  .version(HARNESS_VERSION)
  .showHelpAfterError("(run with --help for the options)")
  .exitOverride();

registerRun(program);
registerReport(program);
registerGate(program);
registerMerge(program);
registerServe(program);
registerLoad(program);
registerFixtures(program);
registerGoldens(program);

/** Errors become one line and every ending an exit code in exit-code.ts, and only there. */
await runToEnd(() => program.parseAsync(process.argv));
