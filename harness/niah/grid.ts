import type { NeedleScore } from "./score.js";

export interface GridCase {
  readonly length: number;
  readonly depth: number;
  readonly score: NeedleScore;
}

/**
 * The length × depth grid as text (one row per L, one column per depth; several trials print as
 * e.g. "YYP"), for the run summary and the report's heatmap.
 */
export function renderNeedleGrid(label: string, cases: readonly GridCase[]): string {
  const lengths = [...new Set(cases.map((c) => c.length))].sort((a, b) => a - b);
  const depths = [...new Set(cases.map((c) => c.depth))].sort((a, b) => a - b);
  const cellText = (length: number, depth: number) => cases.filter((c) => c.length === length && c.depth === depth).map((c) => c.score).join("") || "-";
  const width = Math.max(5, ...lengths.flatMap((l) => depths.map((d) => cellText(l, d).length + 1)));
  const header = `  ${"L \\ depth".padEnd(10)}${depths.map((d) => d.toFixed(2).padEnd(width)).join("")}`;
  const rows = lengths.map((l) => `  ${String(l).padEnd(10)}${depths.map((d) => cellText(l, d).padEnd(width)).join("")}`);
  const y = cases.filter((c) => c.score === "Y").length;
  return [`${label} needle grid: ${y}/${cases.length} Y`, header, ...rows].join("\n");
}
