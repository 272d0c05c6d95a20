import type { Command } from "commander";
import { checkShardsJoin, writeMergedRun } from "../../results/merge.js";
import { RUNS_DIR } from "../../paths.js";
import { readRun } from "../../results/read-run.js";
import { setExitCode } from "../exit-code.js";
import { say, warn } from "../output.js";

export function registerMerge(program: Command): void {
  program
    .command("merge")
    .description("join the shard runs of one battery (bench run --shard i/n on several boxes) into one run directory, for bench gate and bench report")
    .argument("<runs...>", "the shard runs: run ids under --runs-dir or run directories, one for each i of the same n")
    .requiredOption("--out <dir>", "the merged run's directory (must not exist); its name is the run id")
    .option("--runs-dir <dir>", "where run directories are", RUNS_DIR)
    .addHelpText("after", "\nRefused (exit 2, one line): runs of different commits, harness versions, options, suites or goldens; a shard missing or given twice; an arm in two shards.\nOtherwise the exit code is the merged run's, derived from its verdicts (0, 1, 77), or 2 if a shard did not complete.")
    .action(async (runArgs: string[], options: { out: string; runsDir: string }) => {
      const { shards, warning } = checkShardsJoin(runArgs.map((id) => readRun(id, options.runsDir)));
      if (warning !== undefined) warn(warning, "run the shards in a git checkout, or under GitHub Actions");
      const merged = await writeMergedRun(shards, options.out, process.argv.slice(2));
      say(`merged ${shards.length} shards (${shards.map(({ run }) => run.summary.run_id).join(", ")}) into ${merged.directory}: ${merged.verdicts.length} gate verdicts, exit ${merged.exitCode}`);
      setExitCode(merged.exitCode);
    });
}
