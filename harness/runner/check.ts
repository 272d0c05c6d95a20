import { BenchError } from "../errors.js";
import { splitNonFinite } from "../results/finite-metrics.js";
import type { CellRecord, CheckName, GateVerdict, RunListener } from "../results/types.js";
import type { GateLevel, SuiteArm } from "../suites/parity-suite.js";
import { RUNNER_METHODS } from "../sut/runner-lines.js";
import { hasCapability, type Capability, type SystemUnderTest } from "../sut/types.js";

/** What every check of one arm shares. */
export interface ArmScope {
  readonly suiteName: string;
  readonly arm: Pick<SuiteArm, "label" | "gate">;
  readonly sut: SystemUnderTest;
  readonly emit: RunListener;
  readonly signal: AbortSignal;
  /** The command line that reruns this arm; `--prompt` / `--niah-case` selectors are appended per cell. */
  readonly reproduce: string;
}

/**
 * A body's verdict. "skip": nothing failed, but the check (or part of it) could not fail on this
 * data — goldens without log-probs, a kernel case the SUT has no kernel for — SKIPPED, never a pass.
 */
export type CheckOutcome =
  | { readonly status: "pass" | "fail"; readonly summary: string; readonly metrics: Record<string, number | string | null> }
  | { readonly status: "skip"; readonly reason: string };

/**
 * A check whose errors belong to cases it already recorded (each cell keeps its prompt or needle
 * case and its reproduce line): the verdict is an error, with no second, anonymous cell.
 */
export class ErrorsInCells extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ErrorsInCells";
  }
}

/** Gate level of a check on an arm: required only if both the arm and the check are. */
export function gateOf(arm: Pick<SuiteArm, "gate">, check: GateLevel): GateLevel {
  return arm.gate === "required" && check === "required" ? "required" : "informational";
}

const EMPTY_CELL = {
  prompt: null, position: null, expected_id: null, observed_id: null, gap_mnats: null, gap_lower_bound: null, prompt_class: null,
  niah_length: null, niah_depth: null, niah_trial: null, niah_seed: null,
  kernel_ratio: null, kernel_us_median: null, kernel_us_p10: null, kernel_us_p90: null, kernel_in_plugin_us_median: null, kernel_gbps: null, kernel_gflops: null, kernel_bandwidth_fraction: null,
} as const;

export function makeCell(scope: ArmScope, check: CheckName, gate: GateLevel, fields: Partial<CellRecord> & Pick<CellRecord, "status" | "detail">, selector = ""): CellRecord {
  return { suite: scope.suiteName, arm: scope.arm.label, check, gate, ...EMPTY_CELL, reproduce: `${scope.reproduce}${selector}`, ...fields };
}

/**
 * A non-finite metric (a NaN log-prob, a model with NaN weights) is the SUT's failure, never a
 * number in summary.json (whose schema, like JSON itself, has no NaN): the metric becomes null,
 * the check fails, and its summary names the metrics.
 */
function finiteOutcome(outcome: CheckOutcome): { outcome: CheckOutcome; nonFinite: string[] } {
  if (outcome.status === "skip") return { outcome, nonFinite: [] };
  const { nonFinite, metrics } = splitNonFinite(outcome.metrics);
  if (nonFinite.length === 0) return { outcome, nonFinite };
  return { outcome: { status: "fail", summary: `${outcome.summary}; FAIL: the SUT's answers gave non-finite ${nonFinite.join(", ")}`, metrics }, nonFinite };
}

/**
 * An informational check measures how far a working SUT is from its oracle; an answer that breaks
 * its request's shape (a rejected answer, a NaN) is a broken SUT, not a distance. On a required arm
 * it fails the run whatever the check's level, so a SUT cannot pass by breaking only the
 * informational checks' answers.
 */
function brokenAnswersEscalate(arm: Pick<SuiteArm, "gate">, gate: GateLevel, { outcome, nonFinite }: { outcome: CheckOutcome; nonFinite: string[] }): CheckOutcome & { gate?: GateLevel } {
  if (outcome.status !== "fail" || arm.gate !== "required" || gate === "required") return outcome;
  const rejected = typeof outcome.metrics.rejected === "number" ? outcome.metrics.rejected : 0;
  if (rejected === 0 && nonFinite.length === 0) return outcome;
  return { ...outcome, gate: "required", summary: `${outcome.summary}; counted as required: the SUT's answers are broken, not merely distant` };
}

/**
 * Runs one check: SKIPPED with the reason when the SUT lacks a capability it needs or the body
 * finds nothing it could fail on (never passed), an error verdict when it throws (the other checks still run), otherwise the body's verdict.
 * A BenchError naming a file is bad input and aborts the run instead.
 */
export async function runCheck(
  scope: ArmScope,
  name: CheckName,
  level: GateLevel | undefined,
  needs: readonly Capability[],
  body: (gate: GateLevel) => Promise<CheckOutcome>,
): Promise<GateVerdict | undefined> {
  if (level === undefined || scope.signal.aborted) return undefined;
  const gate = gateOf(scope.arm, level);
  const base = { suite: scope.suiteName, arm: scope.arm.label, check: name, gate };
  const missing = needs.filter((capability) => !hasCapability(scope.sut, capability));
  let verdict: GateVerdict;
  if (missing.length > 0) {
    // Named as the runner protocol names them (kernel_time, not kernelTime): what a runner's author greps for.
    const wire = (c: Capability) => (RUNNER_METHODS as Readonly<Record<string, string>>)[c] ?? c;
    verdict = { ...base, status: "skip", reason: `${scope.sut.label} lacks ${missing.map((c) => scope.sut.unsupported?.[c] === undefined ? wire(c) : `${wire(c)}: ${scope.sut.unsupported[c]}`).join(", ")}` };
    await scope.emit({ kind: "cells", cells: [makeCell(scope, name, gate, { status: "skip", detail: verdict.reason })] });
  } else {
    try {
      await scope.emit({ kind: "progress", message: `${scope.suiteName} · ${scope.arm.label} · ${name}` });
      // The body records the cells of its own verdict (a skip included); runCheck records a cell only for a verdict it decides itself.
      const outcome = finiteOutcome(await body(gate));
      verdict = { ...base, ...brokenAnswersEscalate(scope.arm, gate, outcome) };
      if (outcome.outcome.status !== "skip" && outcome.nonFinite.length > 0) await scope.emit({ kind: "cells", cells: [makeCell(scope, name, gate, { status: "fail", detail: outcome.outcome.summary })] });
    } catch (error) {
      if (error instanceof BenchError && error.file !== undefined) throw error;
      const reason = error instanceof BenchError ? error.oneLine() : error instanceof Error ? error.message : String(error);
      verdict = { ...base, status: "error", reason };
      if (!(error instanceof ErrorsInCells)) await scope.emit({ kind: "cells", cells: [makeCell(scope, name, gate, { status: "error", detail: reason })] });
    }
  }
  await scope.emit({ kind: "verdict", verdict });
  return verdict;
}
