import { join } from "node:path";
import type { Baseline } from "../gates/baseline.js";
import { PACKAGE_ROOT } from "../paths.js";
import type { StoredRun } from "../results/read-run.js";
import { HARNESS_VERSION } from "../version.js";
import { QUANTITY_KINDS, quantitiesOfRun } from "./quantities.js";
import { buildTrends, type TrendChange, type Trends } from "./trends.js";
import { latestVerdict, type LatestVerdict } from "./verdict.js";

export const HISTORY_SCHEMA = join(PACKAGE_ROOT, "reports", "history.schema.json");

/** A run directory that was asked for (through a directory of runs or --last) but could not be read. */
export interface UnreadableRun {
  readonly directory: string;
  readonly reason: string;
}

/** Everything the report says across runs: trends, changes, and the latest run's verdict. */
export interface History {
  readonly trends: Trends;
  readonly verdict: LatestVerdict;
  readonly baseline: { readonly file: string; readonly name: string; readonly fromRun: string } | null;
  readonly unreadable: readonly UnreadableRun[];
}

/** Pure: `runs` in start-time order (oldest first), at least one. */
export function historyOfRuns(runs: readonly StoredRun[], baseline: { file: string; baseline: Baseline } | undefined, unreadable: readonly UnreadableRun[]): History {
  const trends = buildTrends(runs.map((run) => ({
    runId: run.summary.run_id, started: run.summary.started, status: run.summary.status, exitCode: run.summary.exit_code, machine: run.summary.machine, quantities: quantitiesOfRun(run),
  })), baseline?.baseline);
  return {
    trends,
    verdict: latestVerdict(runs.map((r) => r.summary), trends),
    baseline: baseline === undefined ? null : { file: baseline.file, name: baseline.baseline.name, fromRun: baseline.baseline.from_run },
    unreadable,
  };
}

const changeJson = (c: TrendChange) => ({
  key: c.key, kind: c.kind, machine: c.machine, direction: c.direction, state: c.state, first_run: c.firstRun, previous_run: c.previousRun, before: c.before, after: c.after, ongoing: c.ongoing,
});

/** history.json (schema: reports/history.schema.json): the same history for dashboards. */
export function historyDocument(history: History): object {
  const { trends, verdict } = history;
  return {
    schema_version: 1,
    harness_version: HARNESS_VERSION,
    baseline: history.baseline === null ? null : { file: history.baseline.file, name: history.baseline.name, from_run: history.baseline.fromRun },
    machines: trends.machines,
    runs: trends.runs.map((r) => ({ run_id: r.runId, started: r.started, status: r.status, exit_code: r.exitCode, machine: r.machine })),
    unreadable: history.unreadable,
    verdict: {
      run_id: verdict.runId, verdict: verdict.word, exit_code: verdict.exitCode, status: verdict.status, machine: verdict.machine,
      not_passed: verdict.notPassed,
      earlier_not_passed: verdict.earlierNotPassed.map((e) => ({ run_id: e.runId, verdict: e.word, exit_code: e.exitCode, gates: e.gates })),
      previous: verdict.previous === null ? null : { run_id: verdict.previous.runId, machine: verdict.previous.machine, same_machine: verdict.previous.sameMachine },
      moved: verdict.moved.map(changeJson),
    },
    series: trends.series.map((s) => ({
      key: s.key, kind: s.kind, title: QUANTITY_KINDS[s.kind].title, unit: QUANTITY_KINDS[s.kind].unit, better: QUANTITY_KINDS[s.kind].better,
      subject: s.subject, machine: s.machine, band: s.band,
      points: s.points.map((p) => ({ run_id: trends.runs[p.run].runId, value: p.value, state: p.state })),
    })),
    changes: trends.changes.map(changeJson),
  };
}
