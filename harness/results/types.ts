import type { KernelOpName } from "../../kernels/ops/registry.js";
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
  /** Kernel cases: the worst element's error as a fraction of its bound (null: bit-exact outputs only). */
  readonly kernel_ratio: number | null;
  /** Kernel cases timed with --time: µs per call (median, p10, p90) as the harness measured it, the plugin's own C loop's median, and the rates they imply. */
  readonly kernel_us_median: number | null;
  readonly kernel_us_p10: number | null;
  readonly kernel_us_p90: number | null;
  readonly kernel_in_plugin_us_median: number | null;
  readonly kernel_gbps: number | null;
  readonly kernel_gflops: number | null;
  /** GB/s as a fraction of the copy bandwidth measured in the same run (the roofline column). */
  readonly kernel_bandwidth_fraction: number | null;
  readonly detail: string;
  /** One command line that reproduces this cell (test-backend-ops style). */
  readonly reproduce: string;
}

/**
 * A check's name as a run directory holds it. A string, not the check registry's names
 * (harness/runner/checks/registry.ts): a run read back may come from another version of the
 * harness, whose checks this one does not know, and the results layer stays below the runner.
 */
export type CheckName = string;

/** Kernel suites: one check per op of the registry (kernels/ops/registry.ts, whose names a type-only import brings), and the timing pass. */
export type KernelCheckName = KernelOpName | "kernel_time";

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
  /** A line worth keeping in a CI log (progress is redrawn on a terminal and silent in CI): a wait for the device lock, a failed reset, arms left out and why. */
  | { readonly kind: "notice"; readonly message: string }
  | { readonly kind: "cells"; readonly cells: readonly CellRecord[] }
  | { readonly kind: "verdict"; readonly verdict: GateVerdict }
  | { readonly kind: "arm-end"; readonly suite: string; readonly arm: string; readonly summaryLine: string | undefined };

export type RunListener = (event: RunEvent) => void | Promise<void>;
