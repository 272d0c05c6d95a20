import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { exitCodeFor } from "../../harness/results/verdicts.js";
import { RunDirectory } from "../../harness/results/run-directory.js";
import type { CellRecord, CheckName, GateVerdict } from "../../harness/results/types.js";

/** A cell with every column null but the ones given (cells.arrow needs them all). */
function cell(fields: Partial<CellRecord> & Pick<CellRecord, "suite" | "arm" | "check" | "status" | "detail">): CellRecord {
  return {
    gate: "required", prompt: null, position: null, expected_id: null, observed_id: null, gap_mnats: null, gap_lower_bound: null, prompt_class: null,
    niah_length: null, niah_depth: null, niah_trial: null, niah_seed: null, kernel_ratio: null, kernel_us_median: null, kernel_us_p10: null, kernel_us_p90: null,
    kernel_in_plugin_us_median: null, kernel_gbps: null, kernel_gflops: null, kernel_bandwidth_fraction: null, reproduce: "bench run …", ...fields,
  };
}

export const pass = (suite: string, arm: string, check: CheckName, metrics: Record<string, number | string | null>, gate: "required" | "informational" = "required"): GateVerdict =>
  ({ suite, arm, check, gate, status: "pass", summary: `${arm} ${check}: known test values`, metrics });

/** The known values of run `i` (1-based) of the ten-run history. */
export function knownValues(i: number) {
  return {
    f32TokensPerSecond: 100 + i,
    // The regression: Q8_0 slows from 50 to 20 tok/s and loses 4 STRICT prompts at run 6, and stays so.
    q8TokensPerSecond: i < 6 ? 50 : 20,
    q8Strict: i < 6 ? 16 : 12,
    // On the second machine (runs 8–10) the trace demand doubles at run 9.
    traceDemandBytes: i < 9 ? 1_000_000 : 2_000_000,
    // The F32 arm's KV cache doubles at run 4 (KV for twice the slots asked), and stays so.
    kvCacheBytes: i < 4 ? 2_097_152 : 4_194_304,
  };
}

/** Run ids whose spelling sorts differently from their start order (r10 < r2), so ordering must come from the recorded start time. */
export const runId = (i: number) => `r${i}-history`;

/** The machine runs 8–10 report: not this host, so they must form their own series. */
export const OTHER_MACHINE = { hostname: "ci-other", platform: "linux", arch: "arm64", cpus: 64, cpu_model: "Other CPU", memory_bytes: 256 * 2 ** 30, node: process.version };

/**
 * Writes ten runs through the real results writer, one after another (so their recorded start
 * times are in order), with the known values above on every tracked quantity.
 */
export async function writeTenRuns(runsDir: string): Promise<void> {
  for (let i = 1; i <= 10; i++) {
    const v = knownValues(i);
    const run = new RunDirectory(runId(i), runsDir, ["bench", "run", "(test history)"]);
    await run.open();
    run.provenance.suts.push({ suite: "parity16", arm: "F32", provenance: { modelPath: "/models/tiny-random-F32.gguf" } }, { suite: "parity16", arm: "Q8_0", provenance: { modelPath: "/models/tiny-random-Q8_0.gguf" } });
    run.provenance.trace.push({ suite: "parity16", arm: "F32", capture: "decode", demand_bytes: v.traceDemandBytes, region_bytes: 52_428_800, region_semantics: "fixed-total" });
    for (const [group, bytes, predicted] of [["weights", 5_976_883, 5_972_992], ["kv_cache", v.kvCacheBytes, 2_097_152]] as const) {
      run.provenance.memory.push({ suite: "parity16", arm: "F32", model: "tiny-random-F32.gguf", policy: "llamacpp-cpu", device: "CPU", group,
        steady_bytes: bytes, peak_bytes: bytes, predicted_steady_bytes: predicted, predicted_peak_bytes: predicted });
    }
    run.provenance.load.push({ label: "concurrency 1", mode: { kind: "closed", concurrency: 1 }, stopped_by: "requests",
      summary: { outputTokensPerSecond: 30, tokensPerSecondPerUser: 30, ttftMs: { median: 80, p90: 95, p99: 100 }, tpotMs: { median: 8, p90: 9, p99: 10 }, errors: {}, validity: null } });
    const verdicts: GateVerdict[] = [
      pass("parity16", "F32", "greedy_parity", { strict: 16, near_tie: 0, forward_divergent: 0, max_gap_mnats: 0, band_mnats: 500, ms_per_token: 1000 / v.f32TokensPerSecond, tokens_per_second: v.f32TokensPerSecond }),
      pass("parity16", "Q8_0", "greedy_parity", { strict: v.q8Strict, near_tie: 16 - v.q8Strict, forward_divergent: 0, max_gap_mnats: 300, band_mnats: 500, ms_per_token: 1000 / v.q8TokensPerSecond, tokens_per_second: v.q8TokensPerSecond }),
      pass("parity16", "F32", "teacher_forced", { positions: 256, kld_topk_mean: 0.001 }, "informational"),
      i === 10
        ? { suite: "parity16", arm: "Q8_0", check: "teacher_forced", gate: "informational", status: "skip", reason: "the goldens hold no log-probs" }
        : pass("parity16", "Q8_0", "teacher_forced", { positions: 256, kld_topk_mean: 0.004 }, "informational"),
      pass("niah", "copy-4k", "niah", { cases: 2, y: 2, p: 0, n: 0, grid: JSON.stringify([[4000, 0.25, "Y"], [4000, 0.75, "Y"]]) }),
      pass("owned-kernels", "reference", "rms_norm", { cases: 1 }),
      pass("owned-kernels", "reference", "kernel_time", { cases_timed: 1, copy_bandwidth_gbps: 10 }, "informational"),
      pass("load", "concurrency 1", "load", { output_tokens_per_second: 30, ttft_p99_ms: 100, tpot_p99_ms: 10 }),
    ];
    await run.record({ kind: "arm-start", suite: "parity16", arm: "F32", sut: {} });
    await run.record({ kind: "cells", cells: [
      ...Array.from({ length: 16 - v.q8Strict }, (_, p) => cell({ suite: "parity16", arm: "Q8_0", check: "greedy_parity", status: "pass", prompt: p, position: 3, gap_mnats: 300, prompt_class: "NEAR-TIE", detail: "near tie" })),
      cell({ suite: "owned-kernels", arm: "reference", check: "rms_norm", status: "pass", detail: "RMS_NORM(rows=4,cols=64,seed=1): PASS", kernel_ratio: 0.2,
        kernel_us_median: 10, kernel_us_p10: 9, kernel_us_p90: 11, kernel_gbps: 2, kernel_gflops: 0.5, kernel_bandwidth_fraction: 0.2 }),
    ] });
    for (const verdict of verdicts) await run.record({ kind: "verdict", verdict });
    await run.record({ kind: "arm-end", suite: "parity16", arm: "F32", summaryLine: undefined });
    await run.flush("complete", exitCodeFor(verdicts));
    if (i >= 8) {
      // FAKE injection: the writer records the host it runs on; a second machine cannot be had on demand.
      const path = join(runsDir, runId(i), "summary.json");
      const summary = JSON.parse(readFileSync(path, "utf8"));
      summary.machine = OTHER_MACHINE;
      writeFileSync(path, JSON.stringify(summary, null, 2));
    }
    // Start times are recorded to the millisecond: keep consecutive runs apart.
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Writes one run through the real results writer with the given verdicts; its exit code is theirs. */
export async function writeRun(runsDir: string, id: string, verdicts: readonly GateVerdict[]): Promise<void> {
  const run = new RunDirectory(id, runsDir, ["bench", "run", "(test window)"]);
  await run.open();
  for (const verdict of verdicts) await run.record({ kind: "verdict", verdict });
  await run.flush("complete", exitCodeFor(verdicts));
  // Start times are recorded to the millisecond: keep consecutive runs apart.
  await new Promise((resolve) => setTimeout(resolve, 5));
}
