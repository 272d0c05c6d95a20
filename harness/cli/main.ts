import { Command, CommanderError } from "commander";
import { BenchError } from "../errors.js";
import { HARNESS_VERSION } from "../version.js";
import { registerFixtures } from "./commands/fixtures.js";
import { registerGoldens } from "./commands/goldens.js";
import { registerRun } from "./commands/run.js";
import { registerReport } from "./commands/report.js";
import { registerGate } from "./commands/gate.js";
import { registerServe } from "./commands/serve.js";
import { registerLoad } from "./commands/load.js";
import { EXIT } from "../results/exit-code.js";
import { pendingExitCode } from "./exit-code.js";
import { clearProgress } from "./output.js";

const program = new Command()
  .name("bench")
  .description("bringup-bench: parity and performance validation for LLM bring-ups (embedded default: llama.cpp on CPU)")
  .version(HARNESS_VERSION)
  .showHelpAfterError("(run with --help for the options)")
  .exitOverride();

registerRun(program);
registerReport(program);
registerGate(program);
registerServe(program);
registerLoad(program);
registerFixtures(program);
registerGoldens(program);

/** Errors become one line and an exit code here, and only here. */
try {
  await program.parseAsync(process.argv);
  clearProgress();
  process.exitCode = pendingExitCode();
} catch (error) {
  clearProgress();
  if (error instanceof CommanderError) {
    process.exitCode = error.exitCode === 0 ? 0 : EXIT.error;
  } else if (error instanceof BenchError) {
    process.stderr.write(`bench: error: ${error.oneLine()}\n`);
    process.exitCode = EXIT.error;
  } else {
    process.stderr.write(`bench: internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = EXIT.error;
  }
}
