import type { Baseline } from "../gates/baseline.js";
import { machineFingerprint, type MachineInfo } from "../results/machine.js";
import { bandState, baselineBand, defaultBand, isWorse, type Band, type BandState } from "./bands.js";
import { QUANTITY_KINDS, quantityKey, type QuantityKind, type TrackedQuantity } from "./quantities.js";

/** One run of a history, in start-time order. */
export interface HistoryRun {
  readonly runId: string;
  readonly started: string;
  readonly status: string;
  readonly exitCode: number | null;
  /** "machine 1", "machine 2", … in order of first appearance. */
  readonly machine: string;
}

export interface TrendPoint {
  /** Index into the history's runs. */
  readonly run: number;
  readonly value: number;
  readonly state: BandState;
}

/** One quantity on one machine: runs on different machines never share a series. */
export interface TrendSeries {
  readonly key: string;
  readonly kind: QuantityKind;
  readonly subject: string;
  readonly machine: string;
  readonly band: Band;
  readonly points: readonly TrendPoint[];
}

/** A series leaving (or coming back into) its band, attributed to the first run where it did. */
export interface TrendChange {
  readonly key: string;
  readonly kind: QuantityKind;
  readonly machine: string;
  readonly direction: "worse" | "better" | "back within band";
  readonly state: BandState;
  readonly firstRun: string;
  /** The run before it in the same series; null when the series' first run was already outside the band. */
  readonly previousRun: string | null;
  readonly before: number | null;
  readonly after: number;
  /** Still in this state at the series' last run. */
  readonly ongoing: boolean;
}

export interface Trends {
  readonly runs: readonly HistoryRun[];
  readonly machines: readonly { readonly id: string; readonly fingerprint: string }[];
  readonly series: readonly TrendSeries[];
  readonly changes: readonly TrendChange[];
}

/** What trends need of each run; the runs must already be in start-time order. */
export interface RunQuantities {
  readonly runId: string;
  readonly started: string;
  readonly status: string;
  readonly exitCode: number | null;
  readonly machine: MachineInfo;
  readonly quantities: readonly TrackedQuantity[];
}

/**
 * Splits each tracked quantity into one series per machine fingerprint, bands each series (the
 * baseline's band where it has one, else the kind's default band around the series' first value)
 * and lists every change of band state with the first run where it appeared. Pure.
 */
export function buildTrends(runs: readonly RunQuantities[], baseline?: Baseline): Trends {
  const machineIds = new Map<string, string>();
  const historyRuns: HistoryRun[] = runs.map((run) => {
    const fingerprint = machineFingerprint(run.machine);
    if (!machineIds.has(fingerprint)) machineIds.set(fingerprint, `machine ${machineIds.size + 1}`);
    return { runId: run.runId, started: run.started, status: run.status, exitCode: run.exitCode, machine: machineIds.get(fingerprint)! };
  });

  const grouped = new Map<string, { kind: QuantityKind; subject: string; machine: string; values: { run: number; value: number }[] }>();
  runs.forEach((run, index) => {
    for (const q of run.quantities) {
      const key = quantityKey(q);
      const id = `${key}\u0000${historyRuns[index].machine}`;
      let group = grouped.get(id);
      if (group === undefined) grouped.set(id, (group = { kind: q.kind, subject: q.subject, machine: historyRuns[index].machine, values: [] }));
      group.values.push({ run: index, value: q.value });
    }
  });

  const series: TrendSeries[] = [];
  const changes: { change: TrendChange; run: number }[] = [];
  for (const group of grouped.values()) {
    const key = quantityKey(group);
    const first = group.values[0];
    const band = (baseline === undefined ? undefined : baselineBand(group.kind, group.subject, baseline)) ?? defaultBand(group.kind, first.value, runs[first.run].runId);
    const points = group.values.map(({ run, value }) => ({ run, value, state: bandState(value, band) }));
    series.push({ key, kind: group.kind, subject: group.subject, machine: group.machine, band, points });
    points.forEach((point, i) => {
      const previous = i === 0 ? undefined : points[i - 1];
      if (point.state === (previous?.state ?? "within")) return;
      const direction = point.state === "within" ? "back within band" : isWorse(point.state, QUANTITY_KINDS[group.kind].better) ? "worse" : "better";
      const ongoing = points.slice(i).every((p) => p.state === point.state);
      changes.push({ run: point.run, change: {
        key, kind: group.kind, machine: group.machine, direction, state: point.state, firstRun: runs[point.run].runId,
        previousRun: previous === undefined ? null : runs[previous.run].runId, before: previous?.value ?? null, after: point.value, ongoing,
      } });
    });
  }
  const order = (kind: QuantityKind) => Object.keys(QUANTITY_KINDS).indexOf(kind);
  series.sort((a, b) => order(a.kind) - order(b.kind) || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0) || (a.machine < b.machine ? -1 : 1));
  changes.sort((a, b) => a.run - b.run || order(a.change.kind) - order(b.change.kind) || (a.change.key < b.change.key ? -1 : 1));
  return { runs: historyRuns, machines: [...machineIds].map(([fingerprint, id]) => ({ id, fingerprint })), series, changes: changes.map((c) => c.change) };
}
