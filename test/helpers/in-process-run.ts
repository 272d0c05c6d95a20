import { readFileSync } from "node:fs";
import { join } from "node:path";
import { BenchError } from "../../harness/errors.js";
import { EXIT, type ExitCode } from "../../harness/results/exit-code.js";
import { RunDirectory } from "../../harness/results/run-directory.js";
import type { GateVerdict, RunEvent } from "../../harness/results/types.js";
import { exitCodeFor } from "../../harness/results/verdicts.js";
import { runBattery } from "../../harness/runner/run.js";
import { runSelection, type RunOptions } from "../../harness/runner/run-options.js";
import { sourceCommit } from "../../harness/results/source-commit.js";
import { liveChildCount } from "../../harness/sut/child-process.js";

export interface InProcessRun {
  /** The exit code `bench run` gives: the verdicts' code, or 2 when the battery threw (the CLI prints `bench: error: ...` then). */
  readonly code: ExitCode;
  readonly verdicts: GateVerdict[];
  /** What the battery threw (a BenchError's oneLine() is the CLI's stderr line), or undefined. */
  readonly error: unknown;
  /** Each arm's summary line, in the order `bench run` prints them before its verdict table. */
  readonly summaryLines: string[];
}

/**
 * A `bench run` inside the test's own process: the same battery and run directory (summary.json,
 * cells.jsonl) and the exit code the CLI derives, without a process start (0.6 s of CPU to load the
 * harness, 1.2 s more where a leg loads llama.cpp: docs/testing.md) — for a planted fault the CLI
 * cannot carry (a SUT wrapper), and every run a test only reads back. What is about the CLI
 * process itself (argument parsing, its stderr and stdout, signals) needs the real CLI (workspace.ts's
 * `bench`). The CLI kills children a run left behind as it exits; this process goes on to the next
 * test, so a run that leaves one running fails here instead.
 */
export async function runInProcess(runsDir: string, runId: string, options: RunOptions): Promise<InProcessRun> {
  const recorder = new RunDirectory(runId, runsDir, ["test"]);
  // Recorded as the CLI records them: gate, report and serve read the selection.
  recorder.provenance.selection = runSelection(options);
  recorder.provenance.commit = sourceCommit();
  await recorder.open();
  const summaryLines: string[] = [];
  const emit = async (event: RunEvent): Promise<void> => {
    await recorder.record(event);
    if (event.kind === "arm-end" && event.summaryLine !== undefined) summaryLines.push(event.summaryLine);
  };
  let error: unknown;
  try {
    await runBattery(options, recorder, emit);
  } catch (e) {
    error = e;
  }
  const left = liveChildCount();
  if (left > 0) throw new Error(`run ${runId} left ${left} SUT process(es) running after the battery returned: it must close what it opened`);
  const code = error === undefined ? exitCodeFor(recorder.allVerdicts()) : EXIT.error;
  // As the CLI records a run whose battery threw: status error, with the one line it prints.
  if (error === undefined) await recorder.flush("complete", code);
  else await recorder.flush("error", code, reasonOf(error));
  return { code, verdicts: [...recorder.allVerdicts()], error, summaryLines };
}

/**
 * One check's verdict as `bench run`'s table shows it: gate, status, then its summary or reason —
 * of the suite and arm named, or of the only one with that check.
 */
export function verdictRow(run: InProcessRun, check: string, where: { readonly suite?: string; readonly arm?: string } = {}): string {
  const matching = run.verdicts.filter((v) => v.check === check && (where.suite === undefined || v.suite === where.suite) && (where.arm === undefined || v.arm === where.arm));
  if (matching.length !== 1) throw new Error(`${matching.length} ${check} verdicts where ${JSON.stringify(where)}, among: ${describeRun(run)}`);
  const [verdict] = matching;
  return `${verdict.gate} ${verdict.status} ${"summary" in verdict ? verdict.summary : verdict.reason}`;
}

/** Why a run stopped, as the CLI says it: a BenchError's one line (file, field, fix), another error's message. */
function reasonOf(error: unknown): string {
  return error instanceof BenchError ? error.oneLine() : error instanceof Error ? error.message : String(error);
}

/** What `bench run` prints after `bench: error: ` on stderr for the error that stopped the run (empty when none did). */
export function errorLine(run: InProcessRun): string {
  return run.error === undefined ? "" : reasonOf(run.error);
}

/** What an assertion message shows of a run: the summary lines, every verdict, the error. */
export function describeRun(run: InProcessRun): string {
  const verdicts = run.verdicts.map((v) => `${v.suite} / ${v.arm} / ${v.check}: ${v.gate} ${v.status} ${"summary" in v ? v.summary : v.reason}`);
  return [...run.summaryLines, ...verdicts, errorLine(run)].join("\n");
}

/** A run's needle cells' classes (Y, P, N), in the order the run wrote them: what a needle test asserts. */
export function needleClasses(runsDir: string, runId: string): string[] {
  return readFileSync(join(runsDir, runId, "cells.jsonl"), "utf8").trim().split("\n").map((line) => JSON.parse(line) as { check: string; prompt_class: string })
    .filter((cell) => cell.check === "niah").map((cell) => cell.prompt_class);
}
