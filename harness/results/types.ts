import type { GateLevel } from "../suites/parity-suite.js";

/** One row of cells.arrow: one assertion. Columns that do not apply to a check are null. */
export interface CellRecord {
  readonly suite: string;
  readonly arm: string;
  readonly check: CheckName;
  readonly gate: GateLevel;
  readonly prompt: number | null;
  readonly position: number | null;
  readonly status: "pass" | "fail" | "skip" | "error";
  readonly expected_id: number | null;
  readonly observed_id: number | null;
  readonly gap_mnats: number | null;
  readonly gap_lower_bound: boolean | null;
  readonly prompt_class: string | null;
  /** Needle cases: target length, depth, trial and the seed that reproduces the needle. */
  readonly niah_length: number | null;
  readonly niah_depth: number | null;
  readonly niah_trial: number | null;
  readonly niah_seed: number | null;
  readonly detail: string;
  /** One command line that reproduces this cell (test-backend-ops style). */
  readonly reproduce: string;
}

export type CheckName = "tokenizer" | "greedy_parity" | "teacher_forced" | "determinism" | "batch_invariance" | "niah" | "conformance" | "load" | "parity_under_load" | "dequantize" | "matvec" | "trace_demand";

/**
 * A gate's outcome, discriminated on status: only states that ran carry metrics, and a skipped
 * gate carries the reason it did not run (never counted as a pass).
 */
export type GateVerdict =
  | { readonly suite: string; readonly arm: string; readonly check: CheckName; readonly gate: GateLevel; readonly status: "pass" | "fail"; readonly summary: string; readonly metrics: Readonly<Record<string, number | string | null>> }
  | { readonly suite: string; readonly arm: string; readonly check: CheckName; readonly gate: GateLevel; readonly status: "skip"; readonly reason: string }
  | { readonly suite: string; readonly arm: string; readonly check: CheckName; readonly gate: GateLevel; readonly status: "error"; readonly reason: string };

/** What a runner reports as it goes; the CLI decides how to store and show it. */
export type RunEvent =
  | { readonly kind: "arm-start"; readonly suite: string; readonly arm: string; readonly sut: Readonly<Record<string, unknown>> }
  | { readonly kind: "progress"; readonly message: string }
  | { readonly kind: "cells"; readonly cells: readonly CellRecord[] }
  | { readonly kind: "verdict"; readonly verdict: GateVerdict }
  | { readonly kind: "arm-end"; readonly suite: string; readonly arm: string; readonly summaryLine: string | undefined };

export type RunListener = (event: RunEvent) => void | Promise<void>;
