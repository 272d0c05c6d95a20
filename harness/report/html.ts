import type { History } from "./history.js";
import { changesTable, runsTable, seriesByKind, shownBand, trendTable, verdictText, type Table } from "./history-tables.js";
import { QUANTITY_KINDS } from "./quantities.js";
import { kernelTable, loadTable, memoryTable, type RunView } from "./view.js";
import { conformanceDifferences, DIALECT_CAPABILITIES } from "./servers.js";

function escape(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function htmlTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  return `<table><thead><tr>${header.map((h) => `<th>${escape(h)}</th>`).join("")}</tr></thead><tbody>${
    rows.map((row) => `<tr>${row.map((c) => `<td>${escape(c)}</td>`).join("")}</tr>`).join("")}</tbody></table>`;
}

interface TrendChart {
  readonly title: string;
  /** No series has three points: a line says nothing a small table does not, so the page shows the table. */
  readonly asTable: boolean;
  readonly unit: string;
  readonly runs: string[];
  /** Indices of runs whose machine differs from the run before (a dashed line is drawn there). */
  readonly machineChanges: { index: number; machine: string }[];
  readonly datasets: { label: string; dashed: boolean; data: (number | null)[]; outside: boolean[]; band: { low: number | null; high: number | null; from: number; to: number } }[];
}

/** A trend of one or two runs is a dot or a segment: shown as a table instead. */
const MIN_POINTS_FOR_A_CHART = 3;

function trendCharts(history: History): TrendChart[] {
  const runs = history.trends.runs;
  const machineChanges = runs.flatMap((r, i) => (i > 0 && runs[i - 1].machine !== r.machine ? [{ index: i, machine: r.machine }] : []));
  const severalMachines = history.trends.machines.length > 1;
  return seriesByKind(history).map(({ kind, series }) => {
    return {
      title: QUANTITY_KINDS[kind].title, unit: QUANTITY_KINDS[kind].unit, runs: runs.map((r) => r.runId), machineChanges,
      asTable: series.every((s) => s.points.length < MIN_POINTS_FOR_A_CHART),
      datasets: series.map((s) => {
        const data = runs.map((): number | null => null);
        const outside = runs.map(() => false);
        for (const p of s.points) {
          data[p.run] = p.value;
          outside[p.run] = p.state !== "within";
        }
        return {
          label: severalMachines ? `${s.subject} (${s.machine})` : s.subject, dashed: s.machine !== history.trends.machines[0].id,
          data, outside, band: { low: s.band.low, high: s.band.high, from: s.points[0].run, to: s.points[s.points.length - 1].run },
        };
      }),
    };
  });
}

/** The data the page's charts are drawn from; embedded as JSON so the page needs nothing else. */
interface ChartData {
  readonly speed: { labels: string[]; tokensPerSecond: (number | null)[] };
  readonly gaps: { binNats: number; bandNats: number; labels: string[]; series: { arm: string; counts: number[] }[] };
  readonly needles: { arm: string; points: { depth: number; length: number; score: string }[] }[];
  readonly load: { labels: string[]; x: number[]; kind: string; tps: number[]; ttft: (number | null)[][]; tpot: (number | null)[][]; cdf: { x: number; y: number }[][] } | null;
  /** One chart per tracked kind across all runs; a series per subject and machine, null where it has no run. */
  readonly trends: TrendChart[];
  /** Timed kernel cases as (flop/byte, GFLOP/s) under the memory roof the copy bandwidth draws. */
  readonly roofline: { copyGbps: number; points: { x: number; y: number; label: string }[]; roof: { x: number; y: number }[] } | null;
}

function rooflineData(latest: RunView): ChartData["roofline"] {
  const copy = latest.copyBandwidth[0]?.gbps;
  const points = latest.kernels.filter((k) => k.gbps !== null && k.gflops !== null && k.gflops > 0).map((k) => ({ x: k.gflops! / k.gbps!, y: k.gflops!, label: k.line.slice(0, k.line.indexOf(": ")) }));
  if (copy === undefined || points.length === 0) return null;
  const xs = points.map((p) => p.x);
  const low = Math.min(...xs) / 2;
  const high = Math.max(...xs) * 2;
  return { copyGbps: copy, points, roof: [{ x: low, y: copy * low }, { x: high, y: copy * high }] };
}

function chartData(history: History, latest: RunView): ChartData {
  const bandMnats = latest.parity.find((p) => p.bandMnats !== null)?.bandMnats ?? 500;
  const binMnats = bandMnats / 2;
  const maxGap = Math.max(bandMnats * 2, ...latest.parity.flatMap((p) => p.gapsMnats));
  const bins = Math.ceil(maxGap / binMnats);
  const series = latest.parity.filter((p) => p.gapsMnats.length > 0).map((p) => {
    const counts = new Array<number>(bins).fill(0);
    for (const gap of p.gapsMnats) counts[Math.min(bins - 1, Math.floor(gap / binMnats))]++;
    return { arm: p.arm, counts };
  });
  return {
    speed: { labels: latest.parity.filter((p) => p.tokensPerSecond !== null).map((p) => p.arm), tokensPerSecond: latest.parity.filter((p) => p.tokensPerSecond !== null).map((p) => p.tokensPerSecond) },
    gaps: {
      binNats: binMnats / 1000, bandNats: bandMnats / 1000, series,
      labels: Array.from({ length: bins }, (_, i) => `${((i * binMnats) / 1000).toFixed(2)}–${(((i + 1) * binMnats) / 1000).toFixed(2)}`),
    },
    needles: latest.needles.filter((n) => n.grid.length > 0).map((n) => ({ arm: n.arm, points: n.grid.map(([length, depth, score]) => ({ length, depth, score })) })),
    load: latest.load.length === 0 ? null : {
      labels: latest.load.map((l) => l.label), x: latest.load.map((l) => l.x), kind: latest.load[0].kind, tps: latest.load.map((l) => l.outputTokensPerSecond),
      ttft: latest.load.map((l) => [l.ttft?.p50 ?? null, l.ttft?.p90 ?? null, l.ttft?.p99 ?? null]),
      tpot: latest.load.map((l) => [l.tpot?.p50 ?? null, l.tpot?.p90 ?? null, l.tpot?.p99 ?? null]),
      cdf: latest.load.map((l) => l.ttftSortedMs.map((ms, i) => ({ x: ms, y: (i + 1) / l.ttftSortedMs.length }))),
    },
    roofline: rooflineData(latest),
    trends: trendCharts(history),
  };
}

/** Draws the charts from the embedded data; sets window.benchChartsRendered when done (the browser test waits on it). */
const PAGE_SCRIPT = String.raw`
const data = JSON.parse(document.getElementById("bench-data").textContent);
const colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];
const charts = [];
if (document.getElementById("chart-speed")) charts.push(new Chart(document.getElementById("chart-speed"), {
  type: "bar",
  data: { labels: data.speed.labels, datasets: [{ label: "tok/s (batch 1)", data: data.speed.tokensPerSecond, backgroundColor: colours[0] }] },
  options: { animation: false, scales: { x: { title: { display: true, text: "SUT arm" } }, y: { beginAtZero: true, title: { display: true, text: "tokens / s" } } } },
}));
const bandLine = {
  id: "bandLine",
  afterDraw(chart) {
    const x = chart.scales.x;
    const left = x.getPixelForValue(1), right = x.getPixelForValue(2);
    const at = (left + right) / 2;
    const ctx = chart.ctx;
    ctx.save(); ctx.strokeStyle = "#d62728"; ctx.setLineDash([6, 4]); ctx.lineWidth = 2;
    ctx.beginPath(); ctx.moveTo(at, chart.chartArea.top); ctx.lineTo(at, chart.chartArea.bottom); ctx.stroke();
    ctx.fillStyle = "#d62728"; ctx.fillText("near-tie band " + data.gaps.bandNats.toFixed(2) + " nats", at + 4, chart.chartArea.top + 12);
    ctx.restore();
  },
};
if (document.getElementById("chart-gaps")) charts.push(new Chart(document.getElementById("chart-gaps"), {
  type: "bar",
  data: { labels: data.gaps.labels, datasets: data.gaps.series.map((s, i) => ({ label: s.arm, data: s.counts, backgroundColor: colours[i % colours.length] })) },
  options: { animation: false, scales: { x: { stacked: true, title: { display: true, text: "gap (nats)" } }, y: { stacked: true, beginAtZero: true, title: { display: true, text: "divergent cells" } } } },
  plugins: [bandLine],
}));
const scoreColour = { Y: "#2ca02c", P: "#ffbf00", N: "#d62728" };
data.needles.forEach((needle, i) => {
  charts.push(new Chart(document.getElementById("chart-needle-" + i), {
    type: "scatter",
    data: { datasets: [{ label: needle.arm + " (Y green, P amber, N red)", data: needle.points.map((p) => ({ x: p.depth, y: p.length, score: p.score })),
      pointStyle: "rect", pointRadius: 22, pointHoverRadius: 24, backgroundColor: needle.points.map((p) => scoreColour[p.score]) }] },
    options: { animation: false, scales: { x: { min: 0, max: 1, title: { display: true, text: "needle depth (fraction of the context)" } }, y: { title: { display: true, text: "L (tokens)" } } },
      plugins: { tooltip: { callbacks: { label: (c) => "L=" + c.raw.y + " depth=" + c.raw.x + ": " + c.raw.score } } } },
  }));
});
if (data.load) {
  charts.push(new Chart(document.getElementById("chart-throughput"), {
    type: "line",
    data: { labels: data.load.x, datasets: [{ label: "output tok/s", data: data.load.tps, borderColor: colours[0], backgroundColor: colours[0] }] },
    options: { animation: false, scales: { x: { title: { display: true, text: data.load.kind === "closed" ? "concurrency (clients)" : "arrival rate (req/s)" } }, y: { beginAtZero: true, title: { display: true, text: "tokens / s" } } } },
  }));
}
if (document.getElementById("chart-latency")) {
  charts.push(new Chart(document.getElementById("chart-latency"), {
    type: "bar",
    data: { labels: data.load.labels, datasets: ["p50", "p90", "p99"].flatMap((p, i) => [
      { label: "TTFT " + p, data: data.load.ttft.map((r) => r[i]), backgroundColor: colours[i] },
    ]).concat(["p50", "p90", "p99"].map((p, i) => ({ label: "TPOT " + p, data: data.load.tpot.map((r) => r[i]), backgroundColor: colours[i + 3] }))) },
    options: { animation: false, scales: { x: { title: { display: true, text: "load point" } }, y: { beginAtZero: true, title: { display: true, text: "latency (ms)" } } } },
  }));
}
if (data.load && data.load.cdf.some((c) => c.length > 0)) {
  charts.push(new Chart(document.getElementById("chart-ttft-cdf"), {
    type: "line",
    data: { datasets: data.load.cdf.map((points, i) => ({ label: data.load.labels[i], data: points, borderColor: colours[i % colours.length], backgroundColor: colours[i % colours.length], stepped: true, pointRadius: 0 })) },
    options: { animation: false, parsing: false, scales: { x: { type: "linear", title: { display: true, text: "TTFT (ms)" } }, y: { min: 0, max: 1, title: { display: true, text: "fraction of requests" } } } },
  }));
}
/**
 * Shades the band of the selected series only (the <select> above the chart; eight bands at once
 * are one muddy block), over the runs it spans; a missing edge reaches the chart's edge. Records
 * which bands it drew on the chart (chart.$bandsDrawn) so the browser test can check it.
 */
const bandShading = {
  id: "bandShading",
  beforeDatasetsDraw(chart) {
    const { ctx, chartArea, scales } = chart;
    const half = (scales.x.getPixelForValue(1) - scales.x.getPixelForValue(0)) / 2 || 10;
    chart.$bandsDrawn = [];
    chart.data.datasets.forEach((dataset, index) => {
      const band = dataset.band;
      if (index !== (chart.$bandFor ?? 0) || !chart.isDatasetVisible(index) || !band || (band.low === null && band.high === null)) return;
      const left = scales.x.getPixelForValue(band.from) - half, right = scales.x.getPixelForValue(band.to) + half;
      const top = band.high === null ? chartArea.top : Math.max(chartArea.top, scales.y.getPixelForValue(band.high));
      const bottom = band.low === null ? chartArea.bottom : Math.min(chartArea.bottom, scales.y.getPixelForValue(band.low));
      ctx.save(); ctx.globalAlpha = 0.15; ctx.fillStyle = dataset.borderColor;
      ctx.fillRect(Math.max(left, chartArea.left), top, Math.min(right, chartArea.right) - Math.max(left, chartArea.left), Math.max(bottom - top, 1));
      ctx.restore();
      chart.$bandsDrawn.push(index);
    });
  },
  afterDraw(chart, args, options) {
    const { ctx, chartArea, scales } = chart;
    for (const change of options.machineChanges || []) {
      const at = (scales.x.getPixelForValue(change.index - 1) + scales.x.getPixelForValue(change.index)) / 2;
      ctx.save(); ctx.strokeStyle = "#444"; ctx.setLineDash([4, 4]);
      ctx.beginPath(); ctx.moveTo(at, chartArea.top); ctx.lineTo(at, chartArea.bottom); ctx.stroke();
      ctx.fillStyle = "#444"; ctx.fillText("→ " + change.machine, at + 4, chartArea.top + 12);
      ctx.restore();
    }
  },
};
/**
 * Names each visible series at its last point, so equal or crossing lines stay told apart: labels
 * that would land on one another are stacked one line apart. Records them (chart.$directLabels).
 */
const directLabels = {
  id: "directLabels",
  afterDatasetsDraw(chart) {
    const { ctx, chartArea } = chart;
    const placed = [];
    chart.$directLabels = [];
    chart.data.datasets.forEach((dataset, index) => {
      if (!chart.isDatasetVisible(index)) return;
      const points = chart.getDatasetMeta(index).data.filter((p, i) => dataset.data[i] !== null && dataset.data[i] !== undefined);
      const last = points[points.length - 1];
      if (!last) return;
      let y = last.y;
      while (placed.some((other) => Math.abs(other.y - y) < 12 && Math.abs(other.x - last.x) < 80)) y += 12;
      placed.push({ x: last.x, y });
      ctx.save(); ctx.fillStyle = dataset.borderColor; ctx.font = "11px sans-serif"; ctx.textBaseline = "middle";
      const width = ctx.measureText(dataset.label).width;
      const x = last.x + 6 + width > chartArea.right ? last.x - 6 - width : last.x + 6;
      ctx.fillText(dataset.label, x, Math.min(Math.max(y, chartArea.top + 6), chartArea.bottom - 6));
      ctx.restore();
      chart.$directLabels.push(dataset.label);
    });
  },
};
/** Ten colours told apart, one per series of a chart (series of one subject on two machines differ by dash too). */
const trendColours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
/** The y range takes in the bands' edges, so a shaded band is never cut off by the data's own range. */
const edge = (trend, side, pick) => {
  const edges = trend.datasets.map((d) => d.band[side]).filter((v) => v !== null);
  return edges.length === 0 ? undefined : pick(...edges);
};
data.trends.forEach((trend, i) => {
  if (trend.asTable) return;
  const chart = new Chart(document.getElementById("chart-trend-" + i), {
    type: "line",
    data: { labels: trend.runs, datasets: trend.datasets.map((d, k) => ({
      label: d.label, data: d.data, band: d.band, spanGaps: false, borderColor: trendColours[k % trendColours.length], backgroundColor: trendColours[k % trendColours.length],
      borderDash: d.dashed ? [6, 3] : [], pointRadius: d.outside.map((o) => (o ? 6 : 3)), pointStyle: d.outside.map((o) => (o ? "triangle" : "circle")),
    })) },
    // The legend toggles a series (Chart.js's own click); the right padding leaves room for the direct labels.
    options: { animation: false, maintainAspectRatio: false, layout: { padding: { right: 8 } },
      plugins: { legend: { display: true }, bandShading: { machineChanges: trend.machineChanges } },
      scales: { x: { title: { display: true, text: "run (oldest → newest, by start time)" } },
        y: { suggestedMin: edge(trend, "low", Math.min), suggestedMax: edge(trend, "high", Math.max), title: { display: true, text: trend.unit } } } },
    plugins: [bandShading, directLabels],
  });
  const select = document.getElementById("band-for-" + i);
  select.addEventListener("change", () => { chart.$bandFor = Number(select.value); chart.update(); });
  charts.push(chart);
});
if (data.roofline) {
  charts.push(new Chart(document.getElementById("chart-roofline"), {
    type: "scatter",
    data: { datasets: [
      { label: "kernel cases", data: data.roofline.points, backgroundColor: colours[0] },
      { label: "memory roof: " + data.roofline.copyGbps.toPrecision(3) + " GB/s copy", data: data.roofline.roof, type: "line", borderColor: colours[3], pointRadius: 0 },
    ] },
    options: { animation: false, scales: { x: { type: "logarithmic", title: { display: true, text: "arithmetic intensity (flop/byte)" } }, y: { type: "logarithmic", title: { display: true, text: "GFLOP/s" } } },
      plugins: { tooltip: { callbacks: { label: (c) => (c.raw.label ? c.raw.label + ": " : "") + c.raw.y.toPrecision(3) + " GFLOP/s" } } } },
  }));
}
window.benchChartsRendered = charts.length;
`;

function listHtml(list: { title: string; items: string[]; none: string }): string {
  return list.items.length === 0 ? `<p><strong>${escape(list.title)}:</strong> ${escape(list.none)}</p>`
    : `<p><strong>${escape(list.title)}:</strong></p><ul>${list.items.map((item) => `<li>${escape(item)}</li>`).join("")}</ul>`;
}

const tableHtml = (t: Table) => htmlTable(t.headers, t.rows);

/** The sections about the whole history: verdict first, the runs, the changes, a trend chart per tracked kind. */
function historyHtml(history: History, data: ChartData): string {
  const verdict = verdictText(history);
  const runs = history.trends.runs;
  const pass = history.verdict.exitCode === 0;
  const bands = history.baseline === null ? "each kind's default band around the series' first run (no --baseline)" : `the bands of baseline ${history.baseline.name} (${history.baseline.file}), else each kind's default band`;
  const changes = runs.length === 1 ? "<p>One run: no changes to list (pass more runs, a directory of runs, or <code>--last N</code>).</p>"
    : history.trends.changes.length === 0 ? `<p>No tracked quantity left its band in these ${runs.length} runs.</p>` : tableHtml(changesTable(history.trends.changes));
  const groups = seriesByKind(history);
  return [
    `<section class="verdict ${!pass ? "fail" : history.verdict.earlierNotPassed.length > 0 ? "mixed" : "pass"}"><h2>Verdict: ${escape(verdict.headline)}</h2>${verdict.lists.map(listHtml).join("")}</section>`,
    `<h2>Runs (${runs.length}, by start time)</h2>${tableHtml(runsTable(history))}`,
    history.trends.machines.length > 1 ? `<ul>${history.trends.machines.map((m) => `<li>${escape(m.id)}: ${escape(m.fingerprint)}</li>`).join("")}</ul><p>Series are kept apart per machine: a line never joins runs on different machines (dashed: a later machine).</p>` : "",
    history.unreadable.length === 0 ? "" : `<p>Left out (could not be read):</p><ul>${history.unreadable.map((u) => `<li><code>${escape(u.directory)}</code>: ${escape(u.reason)}</li>`).join("")}</ul>`,
    `<h2>Changes beyond the band</h2><p>Bands: ${escape(bands)}. Each change is attributed to the first run where it appeared.</p>${changes}`,
    `<h2>Trends</h2>${groups.length === 0 ? "<p>These runs recorded none of the tracked quantities (batch-1 speed, load points, parity, KLD, needles, kernels, trace demand, peak memory).</p>"
      : groups.map(({ kind, series }, i) => `<h3>${escape(data.trends[i].title)} (${escape(QUANTITY_KINDS[kind].unit)}, ${QUANTITY_KINDS[kind].better} is better)</h3>${data.trends[i].asTable
        ? `<p class="bands">Fewer than ${MIN_POINTS_FOR_A_CHART} runs per series: a table, not a chart.</p>${tableHtml(trendTable(series, history))}`
        : `<p class="bands">Bands: ${escape([...new Set(series.map((s) => `${s.subject}${history.trends.machines.length > 1 ? ` (${s.machine})` : ""} ${shownBand(s.band, kind)}`))].join("; "))}. Points outside their band are triangles; click a legend entry to hide or show its series.</p><label class="bands">Band shaded for: <select id="band-for-${i}">${data.trends[i].datasets.map((d, k) => `<option value="${k}">${escape(d.label)}</option>`).join("")}</select></label><div class="chart"><canvas id="chart-trend-${i}"></canvas></div>`}`).join("")}`,
  ].join("\n");
}

/** A self-contained page: the verdict, the history's trends, the latest run's tables and charts; chart.js inlined from node_modules (opens offline). */
export function renderHtmlReport(history: History, latest: RunView, chartJsSource: string): string {
  const data = chartData(history, latest);
  const json = JSON.stringify(data).replace(/</g, "\\u003c");
  const fixed = (v: number | null, d: number) => (v === null ? "–" : v.toFixed(d));
  const load = loadTable(latest.load);
  const kernels = kernelTable(latest.kernels);
  const timed = latest.parity.filter((p) => p.tokensPerSecond !== null);
  const latencies = latest.load.some((l) => l.ttft !== null || l.tpot !== null);
  const graded = latest.needles.filter((n) => n.grid.length > 0);
  const sections = [
    `<h1>bringup-bench report</h1>`,
    historyHtml(history, data),
    `<h2>Latest run <code>${escape(latest.runId)}</code></h2><p>Machine: ${escape(latest.machine)}.</p>`,
    `<h3>Single sequence (batch 1)</h3>${timed.length === 0 ? "<p>No parity arm in this run recorded a batch-1 speed.</p>"
      : `${htmlTable(["model", "SUT arm", "ms/token", "tok/s"], timed.map((p) => [p.model, p.arm, fixed(p.msPerToken, 3), fixed(p.tokensPerSecond, 1)]))}<div class="chart"><canvas id="chart-speed"></canvas></div>`}`,
    latest.load.length === 0
      ? `<h3>Aggregate throughput and latency</h3><p>No load points in this run (<code>bench load</code> writes them).</p>`
      : `<h3>Aggregate throughput and latency</h3>${htmlTable(load.headers, load.rows)}<div class="chart"><canvas id="chart-throughput"></canvas></div>${latencies ? `<h4>Latency percentiles</h4><div class="chart"><canvas id="chart-latency"></canvas></div>` : "<p>No load point recorded TTFT or TPOT.</p>"}${latest.load.some((l) => l.ttftSortedMs.length > 0) ? `<h4>TTFT CDF</h4><div class="chart"><canvas id="chart-ttft-cdf"></canvas></div>` : "<p>No per-request TTFT samples in this run (samples.arrow), so no CDF.</p>"}`,
    latest.parity.length === 0 ? "<h3>Parity</h3><p>No parity suites in this run.</p>" : `<h3>Parity</h3><pre>${escape(latest.parity.map((p) => p.summary).join("\n"))}</pre>${htmlTable(["SUT arm", "gate", "verdict", "STRICT", "NEAR-TIE", "FORWARD-DIVERGENT", "max gap (nats)"],
      latest.parity.map((p) => [p.arm, p.gate, p.status.toUpperCase(), fixed(p.strict, 0), fixed(p.nearTie, 0), fixed(p.forwardDivergent, 0), p.maxGapMnats === null ? "–" : (p.maxGapMnats / 1000).toFixed(3)]))}
     <h4>Gaps of divergent cells</h4>${data.gaps.series.length === 0 ? "<p>No divergent cells: every greedy token matched the goldens, so there are no gaps to plot.</p>" : `<div class="chart"><canvas id="chart-gaps"></canvas></div>`}`,
    `<h3>Kernels</h3>${latest.kernels.length === 0 ? "<p>No kernel suites in this run.</p>" : htmlTable(kernels.headers, kernels.rows)}${data.roofline === null ? "" : `<h4>Roofline (memory roof measured in the same run)</h4><div class="chart"><canvas id="chart-roofline"></canvas></div>`}`,
    `<h3>Long context (needle in a haystack)</h3>${latest.needles.length === 0 ? "<p>No needle suites in this run.</p>" : graded.length === 0 ? "<p>No needle case was scored in this run.</p>" : graded.map((n, i) => `<h4>${escape(n.arm)} — ${n.status.toUpperCase()}</h4><div class="chart small"><canvas id="chart-needle-${i}"></canvas></div>`).join("")}`,
    latest.dialects.length === 0 && latest.conformance.arms.length === 0 ? "" : `<h3>Servers</h3>${latest.dialects.length === 0 ? "" : `<h4>Dialects found by probing</h4>${htmlTable(["SUT arm", "dialect", ...DIALECT_CAPABILITIES], latest.dialects.map((d) => [d.arm, d.dialect, ...DIALECT_CAPABILITIES.map((c) => d.byCapability[c])]))}`}${latest.conformance.arms.length === 0 ? "" : `<h4>Conformance, side by side</h4>${htmlTable(["check", ...latest.conformance.arms], latest.conformance.rows.map((row) => [row.check, ...row.cells.map((c) => c?.status.toUpperCase() ?? "–")]))}<ul>${conformanceDifferences(latest.conformance).map((row) => `<li><b>${escape(row.check)}</b>: ${escape(row.cells.map((c, i) => `${latest.conformance.arms[i]} ${c?.status.toUpperCase() ?? "not run"}${c === undefined ? "" : ` (${c.detail})`}`).join("; "))}</li>`).join("")}</ul>`}`,
    `<h3>Memory by category</h3>${latest.memory.length === 0 ? "<p>No arm in this run has a memory check (an arm declares one with <code>memory</code> in its suite file).</p>" : tableHtml(memoryTable(latest.memory))}`,
    `<h3>Trace-region demand</h3>${latest.trace.length === 0 ? "<p>No SUT in this run reports trace-region demand.</p>" : htmlTable(["SUT arm", "capture", "demand (B)", "region (B)", "semantics"], latest.trace.map((t) => [t.arm, t.capture, String(t.demand_bytes), String(t.region_bytes), t.region_semantics]))}`,
    latest.box.length === 0 ? "" : `<h3>Box: resets and failure evidence</h3><ul>${latest.box.map((line) => `<li>${escape(line)}</li>`).join("")}</ul>`,
  ];
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>bringup-bench report ${escape(latest.runId)}</title>
<style>body{font-family:system-ui,sans-serif;margin:2rem;max-width:1100px}table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:left}
pre{background:#f6f6f6;padding:.5rem;overflow-x:auto;white-space:pre-wrap;overflow-wrap:anywhere}.chart{position:relative;height:320px}.chart.small{height:260px;max-width:520px}
.verdict{border-left:6px solid;padding:.25rem 1rem;margin-bottom:1rem}.verdict.pass{border-color:#2ca02c}.verdict.fail{border-color:#d62728}.verdict.mixed{border-color:#ff9f00}.bands{font-size:.85rem;color:#555}</style>
<script>${chartJsSource.replace(/<\/script/gi, "<\\/script")}</script></head>
<body>${sections.join("\n")}
<script type="application/json" id="bench-data">${json}</script>
<script>${PAGE_SCRIPT}</script></body></html>
`;
}
