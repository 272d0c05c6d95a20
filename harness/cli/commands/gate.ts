import type { Command } from "commander";
import { existsSync } from "node:fs";
import { basename } from "node:path";
import { BenchError } from "../../errors.js";
import { baselineFromRun, gatedMetrics, readBaseline, type Baseline } from "../../gates/baseline.js";
import { baselineRefusal } from "../../gates/baseline-source.js";
import { applyRatchets, baselineDiff } from "../../gates/ratchets.js";
import { sharedFingerprint } from "../../gates/speed-bands.js";
import { machineFingerprint } from "../../results/machine.js";
import { writeFileAtomic } from "../../io/atomic-write.js";
import { RUNS_DIR } from "../../paths.js";
import { EXIT, type ExitCode } from "../../results/exit-code.js";
import { latestRunDirectory, readRun, type StoredRun } from "../../results/read-run.js";
import { setExitCode } from "../exit-code.js";
import { annotate, appendStepSummary } from "../github.js";
import { paint, say, warn } from "../output.js";

interface GateOptions {
  baseline: string;
  runsDir: string;
  strict?: boolean;
  update?: boolean;
  createIfMissing?: boolean;
  acceptFailing?: boolean;
}

export function registerGate(program: Command): void {
  program
    .command("gate")
    .description("hold a run to a baseline: parity and needle ratchets, two-sided perf bands, trace-region demand")
    .argument("[runs...]", "run id under --runs-dir or a run directory (default: the latest run); with --update, more runs of the same battery on the same machine: speed bands are learned from their spread")
    .requiredOption("--baseline <file>", "reports/baselines/<name>.json")
    .option("--runs-dir <dir>", "where run directories are", RUNS_DIR)
    .option("--strict", "a gated metric missing from the baseline fails instead of warning")
    .option("--update", "write the baseline from this run (keeping its tolerances) and print the diff; refused (exit 2) unless the run passed")
    .option("--accept-failing", "with --update: take the baseline from a run that did not pass anyway; the baseline records why, and every gate against it warns (fails under --strict)")
    .option("--create-if-missing", "first run: when the baseline file does not exist, create it from this run if the run passed (exit 0), else write nothing; exit with the run's code")
    .addHelpText("after", "\nExit codes: 0 pass, 1 a ratchet or band failed (or the run itself failed), 2 error, 77 the run skipped a required gate.")
    .action(async (runArgs: string[], options: GateOptions) => {
      if (runArgs.length > 1 && options.update !== true) {
        throw new BenchError(`${runArgs.length} runs given: bench gate holds one run to the baseline`, { field: "[runs...]", fix: "name one run, or add --update to learn the baseline's speed bands from several" });
      }
      const run = readRun(runArgs[0] ?? latestRunDirectory(options.runsDir), options.runsDir);
      const repeats = runArgs.slice(1).map((arg) => readRun(arg, options.runsDir));
      const previous: Baseline | undefined = existsSync(options.baseline) ? readBaseline(options.baseline) : undefined;
      if (options.acceptFailing === true && options.update !== true) {
        throw new BenchError("--accept-failing only applies to --update", { field: "--accept-failing", fix: "add --update, or drop --accept-failing" });
      }
      if (options.update === true) {
        const refusal = baselineRefusal(run);
        if (refusal !== undefined && options.acceptFailing !== true) {
          throw new BenchError(`not a baseline: ${refusal.reason}; a baseline is taken only from a passing run`, {
            file: run.directory, fix: `make the run pass and re-run it, or take it anyway with --update --accept-failing (recorded in ${options.baseline})`,
          });
        }
        if (refusal !== undefined) warn(`${options.baseline} taken from a run that did not pass: ${refusal.reason}`, "recorded as accepted_failing; every gate against it warns, and fails under --strict, until a passing run replaces it");
        checkRepeats(run, repeats);
        const next = baselineFromRun(previous?.name ?? basename(options.baseline, ".json"), run, previous, refusal?.reason, repeats);
        const before = previous === undefined ? "" : `${JSON.stringify(previous, null, 2)}\n`;
        const after = `${JSON.stringify(next, null, 2)}\n`;
        await writeFileAtomic(options.baseline, after);
        const diff = baselineDiff(before, after);
        say(diff.length === 0 ? `${options.baseline}: unchanged` : [`${options.baseline} updated from run ${run.summary.run_id}:`, ...diff].join("\n"));
        return;
      }
      if (previous === undefined && options.createIfMissing === true) {
        await createFirstBaseline(options.baseline, run);
        return;
      }
      if (previous === undefined) {
        throw new BenchError("baseline file does not exist", { file: options.baseline, fix: `create it from a good run: bench gate --baseline ${options.baseline} --update` });
      }
      const findings = applyRatchets(gatedMetrics(run), previous);
      const lines: string[] = [];
      for (const finding of findings) {
        if (finding.level === "fail") {
          lines.push(`${paint("FAIL", "red")}  ${finding.key}: ${finding.message}`);
          annotate("error", `bench gate ${finding.key}`, finding.message);
        } else if (finding.level === "warn") {
          const failsNow = finding.strictFails && options.strict === true;
          lines.push(`${paint(failsNow ? "FAIL" : "WARN", failsNow ? "red" : "yellow")}  ${finding.key}: ${finding.message} (hint: ${finding.hint})`);
          annotate(failsNow ? "error" : "warning", `bench gate ${finding.key}`, `${finding.message} (${finding.hint})`);
        } else {
          lines.push(`ok    ${finding.key}: ${finding.message}`);
        }
      }
      for (const line of lines) say(line);
      const failed = findings.some((f) => f.level === "fail" || (f.level === "warn" && f.strictFails && options.strict === true));
      const runCode = (run.summary.exit_code ?? EXIT.error) as ExitCode;
      if (run.summary.status !== "complete") warn(`run ${run.summary.run_id} is ${run.summary.status}${run.summary.error === undefined ? "" : `: ${run.summary.error}`}`, "gate a complete run");
      // The run's own required gates that did not pass stand beside the ratchets: a 77 must be as loud as a failure.
      const runLines: string[] = [];
      if (runCode !== EXIT.pass) {
        const itself = `run ${run.summary.run_id} itself exited ${runCode}${runCode === EXIT.requiredSkipped ? " (SKIPPED — NOT A PASS)" : ""}${run.summary.status === "complete" ? "" : ` (${run.summary.status})`}`;
        runLines.push(itself);
        annotate("error", `bench gate ${run.summary.run_id}`, itself);
      }
      for (const v of run.summary.verdicts.filter((v) => v.gate === "required" && v.status !== "pass")) {
        const message = v.status === "skip" ? `SKIPPED — NOT A PASS: ${v.reason}` : `${v.status.toUpperCase()}: ${"summary" in v ? v.summary : v.reason}`;
        runLines.push(`${paint(v.status === "skip" ? "SKIP" : v.status.toUpperCase(), "red")}  ${v.suite}/${v.arm}/${v.check}: ${message}`);
        annotate("error", `bench gate ${v.suite}/${v.arm}/${v.check}`, message);
      }
      for (const line of runLines) say(line);
      const code: ExitCode = runCode === EXIT.error || runCode === EXIT.gateFailed ? runCode : failed ? EXIT.gateFailed : runCode;
      const word = { [EXIT.pass]: paint("PASS", "green"), [EXIT.gateFailed]: paint("FAIL", "red"), [EXIT.error]: paint("ERROR", "red"), [EXIT.requiredSkipped]: paint("SKIPPED — NOT A PASS", "red") }[code];
      say(`${word} (exit ${code}) — run ${run.summary.run_id} against ${options.baseline}`);
      appendStepSummary([`### bench gate: ${run.summary.run_id} against \`${options.baseline}\` — exit ${code}`, "", "```", ...[...lines, ...runLines].map((l) => l.replace(/\u001b\[[0-9;]*m/g, "")), "```"].join("\n"));
      setExitCode(code);
    });
}

/**
 * Speed bands are learned only from distinct passing runs of the same selection on the machine the
 * baseline's run ran on: a band that mixes machines or batteries, or a failed run's speed, says
 * nothing about the next run here.
 */
function checkRepeats(run: StoredRun, repeats: readonly StoredRun[]): void {
  const selection = (r: StoredRun) => JSON.stringify(r.summary.selection ?? null);
  for (const repeat of repeats) {
    const refusal = baselineRefusal(repeat);
    if (refusal !== undefined) throw new BenchError(`cannot learn speed bands from it: ${refusal.reason}`, { file: repeat.directory, fix: "leave that run out of the runs given to --update" });
    if (selection(repeat) !== selection(run)) {
      throw new BenchError(`run ${repeat.summary.run_id} selected ${selection(repeat)}, run ${run.summary.run_id} ${selection(run)}: speed bands are learned from repeats of one battery`, {
        file: repeat.directory, field: "selection", fix: "give --update runs made with the same bench run options",
      });
    }
    if (repeat.summary.run_id === run.summary.run_id || repeats.filter((r) => r.summary.run_id === repeat.summary.run_id).length > 1) {
      throw new BenchError(`run ${repeat.summary.run_id} given twice: a spread needs distinct runs`, { file: repeat.directory, fix: "name each run once" });
    }
  }
  if (repeats.length > 0 && sharedFingerprint([run, ...repeats]) === undefined) {
    const other = repeats.find((r) => machineFingerprint(r.summary.machine) !== machineFingerprint(run.summary.machine))!;
    throw new BenchError(`ran on ${machineFingerprint(other.summary.machine)}, run ${run.summary.run_id} on ${machineFingerprint(run.summary.machine)}: speed bands are learned on one machine`, {
      file: other.directory, field: "machine", fix: "give --update runs from one machine only",
    });
  }
}

/**
 * The first run of a new pipeline has no baseline to hold it to: one is taken from it, but only
 * from a run that passed — a failing first run must not become the standard later runs are held to.
 */
async function createFirstBaseline(path: string, run: StoredRun): Promise<void> {
  const refusal = baselineRefusal(run);
  if (refusal !== undefined) {
    say(`${paint("NOT CREATED", "red")} ${path}: ${refusal.reason}; a baseline is taken only from a passing run (exit ${refusal.code})`);
    annotate("error", "bench gate", `no baseline created: ${refusal.reason}`);
    setExitCode(refusal.code);
    return;
  }
  await writeFileAtomic(path, `${JSON.stringify(baselineFromRun(basename(path, ".json"), run), null, 2)}\n`);
  say(`created ${path} from run ${run.summary.run_id} (first run: nothing to hold it to yet) — commit it, and later runs are gated against it (exit 0)`);
  appendStepSummary(`### bench gate: created \`${path}\` from run ${run.summary.run_id} — commit it to gate later runs`);
  setExitCode(EXIT.pass);
}
