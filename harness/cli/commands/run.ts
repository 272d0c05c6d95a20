import type { Command } from "commander";
import { collect, kvCacheType, positiveCount, wholeNumber } from "../option-parsers.js";
import { RUNS_DIR } from "../../paths.js";
import { EXIT } from "../../results/exit-code.js";
import { newRunId, RunDirectory } from "../../results/run-directory.js";
import type { GateVerdict, RunEvent } from "../../results/types.js";
import { exitCodeFor } from "../../results/verdicts.js";
import { runBattery } from "../../runner/run.js";
import { DEFAULT_CASE_TIMEOUT_S, DEFAULT_JOBS, runSelection, type RunOptions } from "../../runner/run-options.js";
import { DEFAULT_RUNNER_RESTARTS } from "../../sut/restarting-runner.js";
import { DEFAULT_BATTERY } from "../../suites/default-battery.js";
import type { LlamaCppSettings } from "../../sut/llamacpp.js";
import { DEFAULT_SHUTDOWN_GRACE_S } from "../../sut/child-process.js";
import { guardRun, setExitCode } from "../exit-code.js";
import { annotate, appendStepSummary } from "../github.js";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { notice, paint, progress, say } from "../output.js";
import { resolveBoxSettings } from "../../box/config.js";
import { legLines } from "../../results/legs.js";
import { parseShard, shardLabel, type Shard } from "../../suites/shard.js";
import { sourceCommit } from "../../results/source-commit.js";

interface RunCliOptions {
  suite: string[];
  arm: string[];
  model?: string;
  runner?: string;
  plugin?: string;
  case: number[];
  op: string[];
  time?: boolean;
  prompt: number[];
  niahCase: string[];
  flashAttention?: boolean;
  kvCacheType?: "F32" | "F16";
  threads?: number;
  caseTimeout: number;
  runnerRestarts: number;
  shutdownGrace: number;
  runsDir: string;
  runId?: string;
  config?: string;
  deviceLock?: string;
  lockTimeout?: number;
  resetCommand?: string;
  bootTimeout?: number;
  legTimeout?: number;
  shard?: Shard;
  jobs: number;
}


function verdictWord(v: GateVerdict): string {
  if (v.status === "skip" && v.gate === "required") return paint("SKIPPED — NOT A PASS", "red");
  return { pass: paint("PASS", "green"), fail: paint("FAIL", "red"), skip: "skipped", error: paint("ERROR", "red") }[v.status];
}

function renderTable(verdicts: readonly GateVerdict[]): string[] {
  const rows = verdicts.map((v) => [v.suite, v.arm, v.check, v.gate, verdictWord(v), "summary" in v ? v.summary.replace(/^.*?: /, "") : v.reason]);
  const header = ["suite", "arm", "check", "gate", "verdict", "detail"];
  const plain = (s: string) => s.replace(/\u001b\[[0-9;]*m/g, "");
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => plain(r[i]).length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c + " ".repeat(widths[i] - plain(c).length))).join("  ");
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)];
}

export function registerRun(program: Command): void {
  program
    .command("run")
    .description(`run suites against their SUT arms and gate the result (default battery: ${DEFAULT_BATTERY.join(", ")})`)
    .option("--suite <name>", "suite name or path (repeatable)", collect(String), [])
    .option("--arm <label>", "only this arm of the suite (repeatable)", collect(String), [])
    .option("--model <model>", "replace the suite's arms with one required arm on this model (fixture[:QUANT] or .gguf)")
    .option("--runner <command>", "replace the suite's arms with one required arm run by this command, which speaks the runner protocol over stdio (split on spaces; {model} becomes the model's path, {bench} the harness's directory)")
    .option("--plugin <library>", "kernel suites: replace the arms with one required arm on this kernel plugin (a shared library built against native/include/bringup_bench_plugin.h)")
    .option("--case <index>", "kernel suites: only this case index (repeatable)", collect(wholeNumber), [])
    .option("--op <name>", "kernel suites: only this op's cases (repeatable; docs/kernel-ops.md lists the ops)", collect(String), [])
    .option("--time", "kernel suites: also time every passing case (µs/call, GB/s, GFLOP/s, and the fraction of the copy bandwidth measured in the same run)")
    .option("--prompt <index>", "parity suites: only this prompt index (repeatable)", collect(wholeNumber), [])
    .option("--niah-case <L:depth:trial>", "needle suites: only this case, e.g. 4000:0.5:0 (repeatable)", collect(String), [])
    .option("--flash-attention", "force flash attention on for every arm")
    .option("--no-flash-attention", "force flash attention off for every arm")
    .option("--kv-cache-type <type>", "KV cache type for every arm (F32 or F16)", kvCacheType)
    .option("--threads <n>", "llama.cpp threads for every arm", wholeNumber)
    .option("--case-timeout <seconds>", "per-case timeout: a SUT call taking longer is an error", wholeNumber, DEFAULT_CASE_TIMEOUT_S)
    .option("--runner-restarts <count>", "per arm, how many times a runner that does not answer within the case timeout is stopped and replaced before the rest of the arm is not run", wholeNumber, DEFAULT_RUNNER_RESTARTS)
    .option("--shutdown-grace <seconds>", "seconds a runner or server gets to exit after it is asked to, before SIGTERM, then SIGKILL", wholeNumber, DEFAULT_SHUTDOWN_GRACE_S)
    .option("--config <file>", "box configuration (default: bench.config.json in the working directory, if there is one): device lock, reset command, boot and leg timeouts, runner environment, extra failure signatures")
    .option("--device-lock <file>", "take this flock before the first device arm (a runner or plugin) and hold it to the end of the run")
    .option("--lock-timeout <seconds>", "give up waiting for the device lock after this long (exit 2)", wholeNumber)
    .option("--reset-command <command>", "run before each device arm and after one whose process had to be killed (split on spaces, no shell), e.g. \"tt-smi -r 0,1,2,3\"")
    .option("--boot-timeout <seconds>", "seconds a runner or server may take to come up", wholeNumber)
    .option("--leg-timeout <seconds>", "wall-clock limit per arm once its SUT is up: then it is stopped (shutdown, SIGTERM, SIGKILL), the box reset, and the arm is ERROR", wholeNumber)
    .option("--shard <i/n>", "only this box's share of the battery's arms: the k-th arm (suite order, then arm order, from 0; an arm with the arms that read its results counts once) runs on shard k mod n + 1; join the shards with bench merge", parseShard)
    .option("--jobs <n>", "suites run at once where their kinds allow it (never two with device arms); what the run prints and records keeps the suites' order (1: one at a time, for speeds measured alone)", positiveCount, DEFAULT_JOBS)
    .option("--runs-dir <dir>", "where run directories go", RUNS_DIR)
    .option("--run-id <id>", "run directory name (default: timestamp)")
    .addHelpText("after", "\nExit codes: 0 all required gates passed, 1 a gate failed, 2 error or a run that did not finish (signal, crash, stall), 77 a required gate did not run (SKIPPED — NOT A PASS). Ctrl-C once stops in order (results kept, exit 2); twice stops at once.")
    .action(async (options: RunCliOptions) => {
      const settings: Partial<LlamaCppSettings> = {
        ...(options.flashAttention === undefined ? {} : { flashAttention: options.flashAttention }),
        ...(options.kvCacheType === undefined ? {} : { kvCacheType: options.kvCacheType }),
        ...(options.threads === undefined ? {} : { threads: options.threads }),
      };
      const box = resolveBoxSettings({
        config: options.config, deviceLock: options.deviceLock, lockTimeoutS: options.lockTimeout, bootTimeoutS: options.bootTimeout, legTimeoutS: options.legTimeout,
        resetCommand: options.resetCommand?.split(" ").filter((part) => part !== ""),
      });
      const controller = new AbortController();
      const runOptions: RunOptions = { suites: options.suite, arms: options.arm, model: options.model, runner: options.runner?.split(" ").filter((part) => part !== ""), plugin: options.plugin, kernelCases: options.case, kernelOps: options.op, time: options.time, prompts: options.prompt, niahCases: options.niahCase, settings, caseTimeoutS: options.caseTimeout, runnerRestarts: options.runnerRestarts, shutdownGraceS: options.shutdownGrace, shard: options.shard, jobs: options.jobs, signal: controller.signal, box };
      const recorder = new RunDirectory(options.runId ?? newRunId(), options.runsDir, process.argv.slice(2));
      recorder.provenance.selection = runSelection(runOptions);
      recorder.provenance.commit = sourceCommit();
      await recorder.open();
      // Until the run is finalised below, every other way out (an error, a signal, a stall) is
      // finalised by exit-code.ts as interrupted or errored, with the reason.
      let stopReason = "interrupted";
      const release = guardRun({
        stop: (signal) => { stopReason = `stopped by ${signal}`; controller.abort(); },
        finalise: (status, reason) => recorder.flush(status, EXIT.error, reason),
        finaliseNow: (status, reason) => recorder.finaliseNow(status, reason),
      });
      const emit = async (event: RunEvent): Promise<void> => {
        await recorder.record(event);
        if (event.kind === "progress") progress(event.message);
        if (event.kind === "notice") notice(event.message);
        if (event.kind === "arm-end" && event.summaryLine !== undefined) say(event.summaryLine);
      };
      const deal = await runBattery(runOptions, recorder, emit);
      // Each box's log says which arms it was dealt, so a CI log shows where an arm ran.
      if (options.shard !== undefined) say(`shard ${shardLabel(options.shard)}: ${deal.arms.length === 0 ? "no arm" : deal.arms.join(", ")} of ${deal.batteryArms} arms`);
      const verdicts = recorder.allVerdicts();
      if (controller.signal.aborted) {
        await recorder.flush("interrupted", EXIT.error, stopReason);
        release();
        say(`interrupted (${stopReason}): kept ${verdicts.length} finished gate verdicts in ${recorder.directory}`);
        setExitCode(EXIT.error);
        return;
      }
      const code = exitCodeFor(verdicts);
      await recorder.flush("complete", code);
      release();
      say("");
      for (const line of renderTable(verdicts)) say(line);
      say("");
      const boxLines = legLines(recorder.provenance.legs);
      if (boxLines.length > 0) {
        for (const line of boxLines) say(line);
        say("");
      }
      const skippedRequired = verdicts.filter((v) => v.status === "skip" && v.gate === "required");
      for (const v of skippedRequired) say(paint(`SKIPPED — NOT A PASS: ${v.suite} / ${v.arm} / ${v.check}: ${"reason" in v ? v.reason : ""}`, "red"));
      const word = { [EXIT.pass]: paint("PASS", "green"), [EXIT.gateFailed]: paint("FAIL", "red"), [EXIT.error]: paint("ERROR", "red"), [EXIT.requiredSkipped]: paint("SKIPPED — NOT A PASS", "red") }[code];
      say(`${word} (exit ${code}) — results in ${recorder.directory}`);
      for (const v of verdicts.filter((v) => v.gate === "required" && v.status !== "pass")) {
        annotate("error", `bench run ${v.suite}/${v.arm}/${v.check}`, "summary" in v ? v.summary : `${v.status === "skip" ? "SKIPPED — NOT A PASS: " : ""}${v.reason}`);
      }
      appendStepSummary(readFileSync(join(recorder.directory, "summary.md"), "utf8"));
      setExitCode(code);
    });
}
