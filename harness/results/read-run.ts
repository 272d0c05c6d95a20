import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { tableFromIPC } from "apache-arrow";
import { BenchError } from "../errors.js";
import { assertMatchesSchema, readJsonFile } from "../io/json-schema.js";
import { RUNS_DIR } from "../paths.js";
import { SUMMARY_SCHEMA, type MergedShard, type RunSelection } from "./run-directory.js";
import type { MachineInfo } from "./machine.js";
import type { CellRecord, GateVerdict } from "./types.js";
import type { VerdictCounts } from "./verdicts.js";
import type { LegRecord } from "./legs.js";

/** summary.json as written by RunDirectory (schema: reports/summary.schema.json). */
export interface RunSummary {
  readonly schema_version: 1;
  readonly run_id: string;
  readonly status: "running" | "complete" | "interrupted" | "error";
  readonly started: string;
  readonly finished: string | null;
  readonly exit_code: number | null;
  /** Why a run that did not complete ended (interrupted or errored). */
  readonly error?: string;
  readonly harness_version: string;
  /** Absent in runs made before it was recorded. */
  readonly commit?: string | null;
  /** bench merge: the shard runs this one joins. */
  readonly merged_from?: readonly MergedShard[];
  readonly machine: MachineInfo;
  readonly command: readonly string[];
  /** Absent in runs made before it was recorded, and for commands other than bench run. */
  readonly selection?: RunSelection;
  readonly suites: readonly { name: string; path: string; sha256: string }[];
  readonly oracles: readonly { suite: string; goldens: string; model: Record<string, unknown>; oracle: Record<string, unknown> }[];
  readonly suts: readonly { suite: string; arm: string; provenance: Record<string, unknown> }[];
  readonly verdicts: readonly GateVerdict[];
  readonly counts: VerdictCounts;
  readonly summary_lines: readonly string[];
  readonly cells: number;
  readonly trace?: readonly TraceDemand[];
  /** Absent in runs made before arms were asked for their allocations. */
  readonly memory?: readonly MemoryRecord[];
  readonly load?: readonly LoadPointRecord[];
  /** Absent in runs made before legs were recorded, and for commands other than bench run. */
  readonly legs?: readonly LegRecord[];
}

/** One bench load point in summary.json: the fields the report and gate read of it. */
export interface LoadPointRecord {
  readonly label: string;
  readonly mode: { readonly kind: "closed"; readonly concurrency: number } | { readonly kind: "open"; readonly rate: number };
  readonly stopped_by: string;
  readonly summary: {
    readonly outputTokensPerSecond: number;
    readonly tokensPerSecondPerUser?: number;
    readonly ttftMs?: { readonly median: number; readonly p90: number; readonly p99: number };
    readonly tpotMs?: { readonly median: number; readonly p90: number; readonly p99: number };
    readonly errors: Readonly<Record<string, number>>;
    /** Absent in runs made before --slo validity existed; null without --slo. */
    readonly validity?: { readonly valid: boolean } | null;
  };
  /** Absent in runs made before the client's own load was recorded. */
  readonly client?: { readonly eventLoopUtilization: number };
}

/** Trace-region demand of one captured graph (docs/metrics.md), as a SUT that exposes it reports it. */
export interface TraceDemand {
  readonly suite: string;
  readonly arm: string;
  readonly capture: string;
  readonly demand_bytes: number;
  readonly region_bytes: number;
  /** fixed per bank, fixed total budget, or dynamic (size 0): tt-metal changed this once, so it is recorded. */
  readonly region_semantics: "fixed-per-bank" | "fixed-total" | "dynamic";
}

/**
 * One device's group of allocations an arm reported (its memory check), beside what its budget
 * predicts: bytes held between requests (steady) and at most (peak); null where the SUT did not report it.
 */
export interface MemoryRecord {
  readonly suite: string;
  readonly arm: string;
  /** The model file the budget was read from (its name). */
  readonly model: string;
  /** The residency policy the budget was made under. */
  readonly policy: string;
  readonly device: string;
  /** A memory gate group: weights, kv_cache, recurrent_state, activations, trace_region (budget/memory-gate.ts). */
  readonly group: string;
  readonly steady_bytes: number | null;
  readonly peak_bytes: number | null;
  readonly predicted_steady_bytes: number;
  readonly predicted_peak_bytes: number;
}

/** The columns of samples.arrow the report reads (one row per measured load request). */
export interface LoadSampleRecord {
  readonly point: string;
  readonly status: string;
  readonly ttft_ms: number | null;
  readonly e2e_ms: number | null;
}

export interface StoredRun {
  readonly directory: string;
  readonly summary: RunSummary;
  readonly cells: readonly CellRecord[];
  readonly samples: readonly LoadSampleRecord[];
}

/**
 * Every run under `runsDir`, newest first by the start time it recorded (a run id is any name
 * --run-id gave it, so its spelling says nothing about when it ran). A summary that cannot be read
 * (cut off, another schema) sorts by its file's time and comes with `summary` undefined: the
 * caller says why it cannot use it, rather than silently using an older run.
 */
export function runSummariesNewestFirst(runsDir = RUNS_DIR): { readonly directory: string; readonly summary: RunSummary | undefined }[] {
  const ids = existsSync(runsDir) ? readdirSync(runsDir).filter((id) => existsSync(join(runsDir, id, "summary.json"))) : [];
  const runs = ids.map((id) => {
    const path = join(runsDir, id, "summary.json");
    let summary: RunSummary | undefined;
    try {
      summary = assertMatchesSchema<RunSummary>(readJsonFile(path), SUMMARY_SCHEMA, path);
    } catch {
      summary = undefined;
    }
    const startedMs = summary === undefined ? statSync(path).mtimeMs : Date.parse(summary.started);
    return { directory: join(runsDir, id), summary, startedMs };
  });
  runs.sort((a, b) => b.startedMs - a.startedMs || (a.directory < b.directory ? 1 : -1));
  return runs.map(({ directory, summary }) => ({ directory, summary }));
}

/** The run that started last under `runsDir`. */
export function latestRunDirectory(runsDir = RUNS_DIR): string {
  const latest = runSummariesNewestFirst(runsDir)[0];
  if (latest === undefined) throw new BenchError("no runs found", { file: runsDir, fix: "run `bench run` first" });
  return latest.directory;
}

/** A run by id (under `runsDir`) or by directory path. */
export function readRun(idOrDirectory: string, runsDir = RUNS_DIR): StoredRun {
  const directory = existsSync(join(idOrDirectory, "summary.json")) ? idOrDirectory : join(runsDir, idOrDirectory);
  const summaryPath = join(directory, "summary.json");
  if (!existsSync(summaryPath)) throw new BenchError(`no run "${idOrDirectory}"`, { file: summaryPath, fix: "pass a run id from reports/runs/ or a run directory" });
  const summary = assertMatchesSchema<RunSummary>(readJsonFile(summaryPath), SUMMARY_SCHEMA, summaryPath);
  const arrowPath = join(directory, "cells.arrow");
  const cells = existsSync(arrowPath) ? (tableFromIPC(readFileSync(arrowPath)).toArray().map((row) => row.toJSON()) as unknown as CellRecord[]) : [];
  const samplesPath = join(directory, "samples.arrow");
  const samples = existsSync(samplesPath) ? (tableFromIPC(readFileSync(samplesPath)).toArray().map((row) => row.toJSON()) as unknown as LoadSampleRecord[]) : [];
  return { directory, summary, cells, samples };
}
