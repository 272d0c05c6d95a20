import type { Band } from "./bands.js";
import type { History } from "./history.js";
import { QUANTITY_KINDS, type QuantityKind } from "./quantities.js";
import type { TrendChange, TrendSeries } from "./trends.js";

/** The history's tables, the same in Markdown and HTML (each renderer only escapes and lays them out). */
export interface Table {
  readonly headers: string[];
  readonly rows: string[][];
}

/** A value in its kind's unit: counts and bytes whole, the rest to four significant digits. */
export function shownValue(value: number, kind: QuantityKind): string {
  return Number.isInteger(value) && ["prompts", "cells", "bytes"].includes(QUANTITY_KINDS[kind].unit) ? String(value) : Number(value.toPrecision(4)).toString();
}

export function shownBand(band: Band, kind: QuantityKind): string {
  const edges = band.low !== null && band.low === band.high ? `= ${shownValue(band.low, kind)}`
    : band.low !== null && band.high !== null ? `${shownValue(band.low, kind)} – ${shownValue(band.high, kind)}`
    : band.low !== null ? `≥ ${shownValue(band.low, kind)}` : band.high !== null ? `≤ ${shownValue(band.high, kind)}` : "any";
  return `${edges} (${band.source === "baseline" ? "baseline" : `around ${band.source}`})`;
}

/** The runs in start-time order, a machine change marked on the first run of the new machine. */
export function runsTable(history: History): Table {
  const runs = history.trends.runs;
  return {
    headers: ["#", "run", "started", "machine", "exit"],
    rows: runs.map((r, i) => [String(i + 1), r.runId, r.started, i > 0 && runs[i - 1].machine !== r.machine ? `${r.machine} (machine changed)` : r.machine, r.exitCode === null ? `– (${r.status})` : String(r.exitCode)]),
  };
}

export function changesTable(changes: readonly TrendChange[]): Table {
  return {
    headers: ["quantity", "machine", "change", "first run", "before → at first run", "still so at its last run"],
    rows: changes.map((c) => [c.key, c.machine, c.direction === "back within band" ? c.direction : `${c.direction} (${c.state} band)`, c.firstRun,
      `${c.before === null ? "(first run on this machine)" : shownValue(c.before, c.kind)} → ${shownValue(c.after, c.kind)} ${QUANTITY_KINDS[c.kind].unit}`, c.ongoing ? "yes" : "no"]),
  };
}

const SPARKS = "▁▂▃▄▅▆▇█";

/** A one-line trend: one block per run of the series, scaled between its own minimum and maximum. */
export function sparkline(values: readonly number[]): string {
  const low = Math.min(...values);
  const high = Math.max(...values);
  return values.map((v) => SPARKS[high === low ? 3 : Math.round(((v - low) / (high - low)) * (SPARKS.length - 1))]).join("");
}

/** One kind's series as a table: the Markdown's stand-in for its chart. */
export function trendTable(series: readonly TrendSeries[], history: History): Table {
  const runs = history.trends.runs;
  return {
    headers: ["subject", "machine", "runs", "band", "first", "latest", "trend (oldest → newest)", "outside band in"],
    rows: series.map((s) => {
      const first = s.points[0];
      const last = s.points[s.points.length - 1];
      const outside = s.points.filter((p) => p.state !== "within").map((p) => runs[p.run].runId);
      return [s.subject, s.machine, String(s.points.length), shownBand(s.band, s.kind), `${shownValue(first.value, s.kind)} (${runs[first.run].runId})`,
        `${shownValue(last.value, s.kind)} (${runs[last.run].runId})`, sparkline(s.points.map((p) => p.value)), outside.length === 0 ? "none" : outside.join(", ")];
    }),
  };
}

/** The series grouped by kind, in the kinds' order (one chart each). */
export function seriesByKind(history: History): { kind: QuantityKind; series: TrendSeries[] }[] {
  return (Object.keys(QUANTITY_KINDS) as QuantityKind[])
    .map((kind) => ({ kind, series: history.trends.series.filter((s) => s.kind === kind) }))
    .filter((group) => group.series.length > 0);
}

/**
 * The verdict the report opens with, as a headline and lists that each say so when they are empty.
 * The headline names the latest run and, beside it, every earlier run of the window that did not pass.
 */
export function verdictText(history: History): { headline: string; lists: { title: string; items: string[]; none: string }[] } {
  const v = history.verdict;
  const fingerprint = history.trends.machines.find((m) => m.id === v.machine)?.fingerprint ?? "";
  const noVerdicts = v.notPassed.length === 0 && v.exitCode !== 0;
  const since = v.previous === null
    ? { title: "Since the previous run", items: [], none: "This is the only run reported: nothing to compare it with." }
    : !v.previous.sameMachine
      ? { title: `Since the previous run ${v.previous.runId}`, items: [], none: `${v.previous.runId} ran on ${v.previous.machine}, this run on ${v.machine}: not compared (each machine keeps its own series).` }
      : {
        title: `Moved beyond (or back within) its band since the previous run ${v.previous.runId}`,
        items: v.moved.map((c) => `${c.key}: ${c.direction}${c.direction === "back within band" ? "" : ` (${c.state} band)`}, ${c.before === null ? "–" : shownValue(c.before, c.kind)} → ${shownValue(c.after, c.kind)} ${QUANTITY_KINDS[c.kind].unit}`),
        none: "Nothing moved beyond its band.",
      };
  const earlier = v.earlierNotPassed.map((e) => `run ${e.runId} ${e.word}${e.gates.length === 0 ? "" : `: ${e.gates.join(", ")}`}`);
  return {
    headline: `${v.word} (exit ${v.exitCode ?? "–"}) — run ${v.runId} on ${v.machine} (${fingerprint})${earlier.length === 0 ? "" : `; earlier in this window, not passed: ${earlier.join("; ")}`}`,
    lists: [
      {
        title: "Did not pass",
        items: v.notPassed.map((n) => `${n.gate} ${n.status === "skip" ? "SKIPPED — NOT A PASS" : n.status.toUpperCase()} ${n.what}: ${n.why}`),
        none: v.exitCode === null ? `No gate has failed or been skipped so far; the run has no exit code (${v.status}).`
          : noVerdicts ? "No gate of this run failed or was skipped, yet it did not exit 0: it recorded no required verdict." : "Every gate of this run passed.",
      },
      {
        title: `Earlier runs of this window that did not pass (${v.earlierNotPassed.length} of ${history.trends.runs.length - 1})`,
        items: earlier,
        none: history.trends.runs.length === 1 ? "This is the only run in the window." : "Every earlier run of this window passed.",
      },
      since,
    ],
  };
}
