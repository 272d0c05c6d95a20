import type { History } from "./history.js";
import { changesTable, runsTable, seriesByKind, trendTable, verdictText } from "./history-tables.js";
import { QUANTITY_KINDS } from "./quantities.js";
import { kernelTable, loadTable, memoryTable, type NeedleRow, type RunView } from "./view.js";
import { conformanceDifferences, DIALECT_CAPABILITIES } from "./servers.js";

const fixed = (value: number | null, digits: number): string => (value === null ? "–" : value.toFixed(digits));
const nats = (mnats: number | null): string => (mnats === null ? "–" : (mnats / 1000).toFixed(3));

function table(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  return [`| ${header.join(" | ")} |`, `|${header.map(() => "---").join("|")}|`, ...rows.map((row) => `| ${row.map((c) => c.replace(/\|/g, "\\|")).join(" | ")} |`)];
}

/** The needle grid as a Markdown table: one row per length, one column per depth. */
export function needleGridTable(row: NeedleRow): string[] {
  const lengths = [...new Set(row.grid.map(([l]) => l))].sort((a, b) => a - b);
  const depths = [...new Set(row.grid.map(([, d]) => d))].sort((a, b) => a - b);
  const cell = (l: number, d: number) => row.grid.filter(([gl, gd]) => gl === l && gd === d).map(([, , s]) => s).join("") || "–";
  return table(["L \\ depth", ...depths.map((d) => d.toFixed(2))], lengths.map((l) => [String(l), ...depths.map((d) => cell(l, d))]));
}

/** The sections about the whole history: verdict first, then the runs, the changes and the trends. */
function historySections(history: History): string[] {
  const out: string[] = [];
  const verdict = verdictText(history);
  out.push(`## Verdict: ${verdict.headline}`, "");
  for (const list of verdict.lists) {
    out.push(`**${list.title}:**${list.items.length === 0 ? ` ${list.none}` : ""}`, "");
    if (list.items.length > 0) out.push(...list.items.map((item) => `- ${item.replace(/\n/g, " ")}`), "");
  }
  const runs = runsTable(history);
  out.push(`## Runs (${runs.rows.length}, by start time)`, "", ...table(runs.headers, runs.rows), "");
  if (history.trends.machines.length > 1) out.push(...history.trends.machines.map((m) => `- ${m.id}: ${m.fingerprint}`), "", "Series are kept apart per machine: a line never joins runs on different machines.", "");
  if (history.unreadable.length > 0) out.push("Left out (could not be read):", "", ...history.unreadable.map((u) => `- \`${u.directory}\`: ${u.reason}`), "");
  const bandWord = history.baseline === null ? "each kind's default band around the series' first run (no --baseline)" : `the bands of baseline ${history.baseline.name} (${history.baseline.file}), else each kind's default band`;
  out.push("## Changes beyond the band", "", `Bands: ${bandWord}. Each change is attributed to the first run where it appeared.`, "");
  if (history.trends.runs.length === 1) out.push("One run: no changes to list (pass more runs, a directory of runs, or `--last N`).", "");
  else if (history.trends.changes.length === 0) out.push(`No tracked quantity left its band in these ${history.trends.runs.length} runs.`, "");
  else {
    const changes = changesTable(history.trends.changes);
    out.push(...table(changes.headers, changes.rows), "");
  }
  out.push("## Trends", "");
  const groups = seriesByKind(history);
  if (groups.length === 0) out.push("These runs recorded none of the tracked quantities (batch-1 speed, load points, parity, KLD, needles, kernels, trace demand, peak memory).", "");
  for (const { kind, series } of groups) {
    const trend = trendTable(series, history);
    out.push(`### ${QUANTITY_KINDS[kind].title} (${QUANTITY_KINDS[kind].unit}, ${QUANTITY_KINDS[kind].better} is better)`, "", ...table(trend.headers, trend.rows), "");
  }
  return out;
}

/**
 * The Markdown report: perf tables in the users' own shape, the parity lines, the needle grids,
 * the servers (dialects found, conformance side by side), trace-region demand, and run-versus-run deltas when two runs are given.
 */
export function renderMarkdownReport(history: History, latest: RunView): string {
  const out = [`# bringup-bench report`, "", ...historySections(history), `## Latest run \`${latest.runId}\``, "", `Machine: ${latest.machine}.`, ""];

  out.push("### Single sequence (batch 1)", "");
  const timed = latest.parity.filter((p) => p.tokensPerSecond !== null);
  if (timed.length === 0) out.push("No parity arm in this run recorded a batch-1 speed.", "");
  else out.push("Greedy decoding of the parity prompts, prompt evaluation included, one sequence at a time.", "",
    ...table(["model", "SUT arm", "ms/token", "tok/s"], timed.map((p) => [p.model, p.arm, fixed(p.msPerToken, 3), fixed(p.tokensPerSecond, 1)])), "");

  out.push("### Aggregate throughput and latency", "");
  if (latest.load.length === 0) out.push("No load points in this run (`bench load` writes them), so no tok/s-by-clients, TTFT or TPOT tables.", "");
  else {
    const { headers, rows } = loadTable(latest.load);
    out.push(...table(headers, rows), "");
  }

  out.push("### Parity", "");
  if (latest.parity.length === 0) out.push("No parity suites in this run.", "");
  else {
    out.push("```", ...latest.parity.map((p) => p.summary.includes("correctness gate") ? p.summary : `${p.arm}: ${p.summary}`), "```", "");
    out.push(...table(["suite", "SUT arm", "gate", "verdict", "STRICT", "NEAR-TIE", "FORWARD-DIVERGENT", "max gap (nats)", "band (nats)"],
      latest.parity.map((p) => [p.suite, p.arm, p.gate, p.status.toUpperCase(), fixed(p.strict, 0), fixed(p.nearTie, 0), fixed(p.forwardDivergent, 0), nats(p.maxGapMnats), nats(p.bandMnats)])), "");
  }

  out.push("### Kernels", "");
  if (latest.kernels.length === 0) out.push("No kernel suites in this run.", "");
  else {
    const { headers, rows } = kernelTable(latest.kernels);
    out.push(...table(headers, rows), "");
    for (const copy of latest.copyBandwidth) out.push(`Copy bandwidth measured in this run for ${copy.arm}: ${copy.gbps.toPrecision(3)} GB/s (the roofline column's denominator).`, "");
  }

  out.push("### Long context (needle in a haystack)", "");
  if (latest.needles.length === 0) out.push("No needle suites in this run.", "");
  for (const needle of latest.needles) {
    out.push(`**${needle.arm}** (${needle.suite}, ${needle.gate}): ${needle.status.toUpperCase()}`, "");
    out.push(...(needle.grid.length === 0 ? ["No needle case of this arm was scored.", ""] : [...needleGridTable(needle), ""]));
  }

  out.push("### Servers", "");
  if (latest.dialects.length === 0) out.push("No HTTP arms in this run.", "");
  else out.push("Dialects found by probing (a capability none serves is SKIPPED, never passed):", "",
    ...table(["suite", "SUT arm", "dialect", ...DIALECT_CAPABILITIES], latest.dialects.map((d) => [d.suite, d.arm, d.dialect, ...DIALECT_CAPABILITIES.map((c) => d.byCapability[c])])), "");
  if (latest.conformance.arms.length > 0) {
    out.push("Conformance, side by side:", "", ...table(["check", ...latest.conformance.arms], latest.conformance.rows.map((row) => [row.check, ...row.cells.map((c) => c?.status.toUpperCase() ?? "–")])), "");
    const differences = conformanceDifferences(latest.conformance);
    if (differences.length > 0) out.push("Where the servers differ, in their own answers:", "");
    for (const row of differences) out.push(`- **${row.check}**: ${row.cells.map((c, i) => `${latest.conformance.arms[i]} ${c?.status.toUpperCase() ?? "not run"}${c === undefined ? "" : ` (${c.detail})`}`).join("; ")}`);
    if (differences.length > 0) out.push("");
  }

  out.push("### Trace-region demand", "");
  if (latest.trace.length === 0) out.push("No SUT in this run reports trace-region demand (the embedded llama.cpp SUT has no captured graph).", "");
  else out.push(...table(["suite", "SUT arm", "capture", "demand (B)", "region (B)", "region semantics", "use"],
    latest.trace.map((t) => [t.suite, t.arm, t.capture, String(t.demand_bytes), String(t.region_bytes), t.region_semantics, t.region_bytes > 0 ? `${((100 * t.demand_bytes) / t.region_bytes).toFixed(1)}%` : "dynamic"])), "");

  out.push("### Memory by category", "");
  if (latest.memory.length === 0) out.push("No arm in this run has a memory check (an arm declares one with `memory` in its suite file: docs/memory-budget.md).", "");
  else {
    const { headers, rows } = memoryTable(latest.memory);
    out.push("What each arm's SUT reported it allocated, by the memory gate's groups, beside the budget its GGUF header predicts (`bench budget`).", "", ...table(headers, rows), "");
  }

  if (latest.box.length > 0) out.push("### Box: resets and failure evidence", "", ...latest.box.map((line) => `- ${line}`), "");
  return `${out.join("\n")}\n`;
}
