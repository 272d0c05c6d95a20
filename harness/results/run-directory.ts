import { appendFile, mkdir } from "node:fs/promises";
import { join } from "node:path";
import { writeFileAtomic, writeFileAtomicSync } from "../io/atomic-write.js";
import { EXIT } from "./exit-code.js";
import { assertMatchesSchema } from "../io/json-schema.js";
import { PACKAGE_ROOT } from "../paths.js";
import { HARNESS_VERSION } from "../version.js";
import { CellsArrowFile } from "./cells-arrow.js";
import { renderJunit } from "./junit.js";
import { describeMachine, machineInfo, type MachineInfo } from "./machine.js";
import { renderMarkdownSummary } from "./markdown.js";
import type { CellRecord, GateVerdict, RunEvent } from "./types.js";
import type { MemoryRecord, TraceDemand } from "./read-run.js";
import type { LegRecord } from "./legs.js";
import type { DealtArm } from "../suites/shard.js";
import { countVerdicts } from "./verdicts.js";

export const SUMMARY_SCHEMA = join(PACKAGE_ROOT, "reports", "summary.schema.json");

export type RunStatus = "running" | "complete" | "interrupted" | "error";

export interface RunProvenance {
  readonly suites: { name: string; path: string; sha256: string }[];
  readonly oracles: { suite: string; goldens: string; model: Record<string, unknown>; oracle: Record<string, unknown> }[];
  readonly suts: { suite: string; arm: string; provenance: Record<string, unknown> }[];
  /** Trace-region demand reported by SUTs that expose it (none of the embedded ones do). */
  readonly trace: TraceDemand[];
  /** Allocations arms reported by category beside their budgets (the memory check of arms that declare one). */
  readonly memory: MemoryRecord[];
  /** Load points (bench load): the client's aggregates and the server's /metrics deltas. */
  readonly load: Record<string, unknown>[];
  /** The run-wide seed (bench load's prompts and arrivals); null where seeds are per cell (NIAH). */
  seed: number | null;
  /** What bench run was asked to run; null for other commands. */
  selection: RunSelection | null;
  /** bench run: the box settings (bench.config.json and flags), and the device lock once taken. */
  box: Record<string, unknown> | null;
  lock: { path: string; waited_ms: number } | null;
  /** One record per arm run: resets, processes, kept stderr and the failure evidence found in it. */
  readonly legs: LegRecord[];
  /** The commit of the checkout the run was made in (source-commit.ts); null where none is known. */
  commit: string | null;
  /** bench merge: the shard runs this one joins, in shard order. */
  mergedFrom: MergedShard[] | null;
}

/** One shard run a merged run was made from: where it ran and how it ended. */
export interface MergedShard {
  readonly run_id: string;
  readonly shard: string;
  readonly status: RunStatus;
  readonly exit_code: number | null;
  readonly machine: MachineInfo;
}

/**
 * The suites, arms, prompts and cases a bench run was limited to: an empty list means all (no
 * --suite: the default battery). bench serve accepts as validation only a run with none of them.
 */
export interface RunSelection {
  readonly suites: readonly string[];
  readonly arms: readonly string[];
  readonly prompts: readonly number[];
  readonly cases: readonly number[];
  readonly niah_cases: readonly string[];
  /** `--op`: only these kernel ops' cases (absent: every op; older runs never record it). */
  readonly ops?: readonly string[];
  /** `--shard i/n`: this run holds only its share of the battery's arms (absent: all of them), and which (older runs do not record them). */
  readonly shard?: { readonly index: number; readonly count: number; readonly dealt?: readonly DealtArm[] };
  /** `--jobs`: suites run at once; a speed measured beside another suite is not one measured alone (older runs do not record it). */
  readonly jobs?: number;
}

/**
 * reports/runs/<run-id>/, written as the run goes: cells.jsonl is appended per batch of cells,
 * and cells.arrow, summary.json, junit.xml and summary.md are rewritten atomically after every
 * arm, so a crash or Ctrl-C keeps every finished cell (hyperfine's crash-safe exports).
 */
export class RunDirectory {
  readonly directory: string;
  private readonly cells: CellRecord[] = [];
  private readonly cellsArrow = new CellsArrowFile();
  private readonly verdicts: GateVerdict[] = [];
  private readonly summaryLines: string[] = [];
  private readonly machine: MachineInfo;
  private readonly started: string;
  readonly provenance: RunProvenance = { suites: [], oracles: [], suts: [], trace: [], memory: [], load: [], seed: null, selection: null, commit: null, mergedFrom: null, box: null, lock: null, legs: [] };
  private samplesArrow: Uint8Array | undefined;
  private writes: Promise<void> = Promise.resolve();
  /** The final status once one was asked for, and whether its files are written. */
  private ending: RunStatus | undefined;
  private endWritten = false;

  /** Replaces samples.arrow at the next flush (bench load writes it after every load point). */
  setSamples(arrow: Uint8Array): void {
    this.samplesArrow = arrow;
  }

  /** `origin`: when and where the results were made, for a run assembled from others (bench merge); default: here, now. */
  constructor(readonly runId: string, runsDir: string, private readonly command: readonly string[], origin?: { readonly started: string; readonly machine: MachineInfo }) {
    this.directory = join(runsDir, runId);
    this.started = origin?.started ?? new Date().toISOString();
    this.machine = origin?.machine ?? machineInfo();
  }

  async open(): Promise<void> {
    await mkdir(this.directory, { recursive: true });
    await this.flush("running", null);
  }

  /** The run's listener: records events, flushing exports at each arm's end. */
  readonly record = async (event: RunEvent): Promise<void> => {
    if (event.kind === "cells") {
      this.cells.push(...event.cells);
      await appendFile(join(this.directory, "cells.jsonl"), event.cells.map((c) => `${JSON.stringify(c)}\n`).join(""));
    } else if (event.kind === "verdict") {
      this.verdicts.push(event.verdict);
    } else if (event.kind === "arm-end") {
      if (event.summaryLine !== undefined) this.summaryLines.push(event.summaryLine);
      await this.flush("running", null);
    }
  };

  allVerdicts(): readonly GateVerdict[] {
    return this.verdicts;
  }

  /** summary.json's text, checked against its schema. */
  private summaryJson(status: RunStatus, exitCode: number | null, error?: string): string {
    const summary = {
      schema_version: 1,
      run_id: this.runId,
      status,
      started: this.started,
      finished: status === "running" ? null : new Date().toISOString(),
      exit_code: exitCode,
      ...(error === undefined ? {} : { error }),
      harness_version: HARNESS_VERSION,
      commit: this.provenance.commit,
      ...(this.provenance.mergedFrom === null ? {} : { merged_from: this.provenance.mergedFrom }),
      seed: this.provenance.seed,
      ...(this.provenance.selection === null ? {} : { selection: this.provenance.selection }),
      machine: this.machine,
      command: [...this.command],
      suites: this.provenance.suites,
      oracles: this.provenance.oracles,
      suts: this.provenance.suts,
      verdicts: this.verdicts,
      counts: countVerdicts(this.verdicts),
      summary_lines: this.summaryLines,
      cells: this.cells.length,
      trace: this.provenance.trace,
      memory: this.provenance.memory,
      load: this.provenance.load,
      ...(this.provenance.box === null ? {} : { box: { ...this.provenance.box, lock: this.provenance.lock } }),
      legs: this.provenance.legs,
    };
    assertMatchesSchema(summary, SUMMARY_SCHEMA, join(this.directory, "summary.json"));
    return `${JSON.stringify(summary, null, 2)}\n`;
  }

  /**
   * Rewrites the exports. Writes are queued, so they land in order; the first final status (not
   * "running") wins and later flushes are ignored: a run stopped at once stays stopped even if
   * its orderly stop finishes a moment later.
   */
  flush(status: RunStatus, exitCode: number | null, error?: string): Promise<void> {
    if (this.ending !== undefined) return this.writes;
    if (status !== "running") this.ending = status;
    const write = this.writes.then(() => this.write(status, exitCode, error));
    this.writes = write.then(() => { if (status !== "running") this.endWritten = true; }, () => undefined);
    return write;
  }

  private async write(status: RunStatus, exitCode: number | null, error?: string): Promise<void> {
    const counts = countVerdicts(this.verdicts);
    await writeFileAtomic(join(this.directory, "summary.json"), this.summaryJson(status, exitCode, error));
    await writeFileAtomic(join(this.directory, "cells.arrow"), this.cellsArrow.bytes(this.cells));
    if (this.samplesArrow !== undefined) await writeFileAtomic(join(this.directory, "samples.arrow"), this.samplesArrow);
    await writeFileAtomic(join(this.directory, "junit.xml"), renderJunit(this.runId, this.verdicts, this.provenance.legs));
    await writeFileAtomic(join(this.directory, "summary.md"), renderMarkdownSummary({
      runId: this.runId, status, exitCode, summaryLines: this.summaryLines, verdicts: this.verdicts, counts, machine: describeMachine(this.machine), legs: this.provenance.legs,
    }));
  }

  /** Marks the run as not finished when no more waiting is possible: summary.json only, synchronously, always exit 2. */
  finaliseNow(status: "interrupted" | "error", reason: string): void {
    if (this.endWritten) return;
    this.ending = status;
    writeFileAtomicSync(join(this.directory, "summary.json"), this.summaryJson(status, EXIT.error, reason));
  }
}

/** Sortable, unique enough for one machine: 20261130-041802-3f9a. */
export function newRunId(now = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 15);
  return `${stamp}-${Math.random().toString(16).slice(2, 6)}`;
}
