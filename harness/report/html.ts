import { kernelTable, loadTable, type RunView } from "./view.js";
import { conformanceDifferences, DIALECT_CAPABILITIES } from "./servers.js";

function escape(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function htmlTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  return `<table><thead><tr>${header.map((h) => `<th>${escape(h)}</th>`).join("")}</tr></thead><tbody>${
    rows.map((row) => `<tr>${row.map((c) => `<td>${escape(c)}</td>`).join("")}</tr>`).join("")}</tbody></table>`;
}

/** The data the page's charts are drawn from; embedded as JSON so the page needs nothing else. */
interface ChartData {
  readonly speed: { labels: string[]; tokensPerSecond: (number | null)[] };
  readonly gaps: { binNats: number; bandNats: number; labels: string[]; series: { arm: string; counts: number[] }[] };
  readonly needles: { arm: string; points: { depth: number; length: number; score: string }[] }[];
  readonly load: { labels: string[]; x: number[]; kind: string; tps: number[]; ttft: (number | null)[][]; tpot: (number | null)[][]; cdf: { x: number; y: number }[][] } | null;
  readonly compare: { before: string; after: string; labels: string[]; before_tps: (number | null)[]; after_tps: (number | null)[]; before_strict: (number | null)[]; after_strict: (number | null)[] } | null;
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

function chartData(runs: readonly RunView[]): ChartData {
  const latest = runs[runs.length - 1];
  const bandMnats = latest.parity.find((p) => p.bandMnats !== null)?.bandMnats ?? 500;
  const binMnats = bandMnats / 2;
  const maxGap = Math.max(bandMnats * 2, ...latest.parity.flatMap((p) => p.gapsMnats));
  const bins = Math.ceil(maxGap / binMnats);
  const series = latest.parity.filter((p) => p.gapsMnats.length > 0).map((p) => {
    const counts = new Array<number>(bins).fill(0);
    for (const gap of p.gapsMnats) counts[Math.min(bins - 1, Math.floor(gap / binMnats))]++;
    return { arm: p.arm, counts };
  });
  const base = runs.length >= 2 ? runs[runs.length - 2] : undefined;
  const before = (arm: string) => base?.parity.find((p) => p.arm === arm);
  return {
    speed: { labels: latest.parity.map((p) => p.arm), tokensPerSecond: latest.parity.map((p) => p.tokensPerSecond) },
    gaps: {
      binNats: binMnats / 1000, bandNats: bandMnats / 1000, series,
      labels: Array.from({ length: bins }, (_, i) => `${((i * binMnats) / 1000).toFixed(2)}–${(((i + 1) * binMnats) / 1000).toFixed(2)}`),
    },
    needles: latest.needles.map((n) => ({ arm: n.arm, points: n.grid.map(([length, depth, score]) => ({ length, depth, score })) })),
    load: latest.load.length === 0 ? null : {
      labels: latest.load.map((l) => l.label), x: latest.load.map((l) => l.x), kind: latest.load[0].kind, tps: latest.load.map((l) => l.outputTokensPerSecond),
      ttft: latest.load.map((l) => [l.ttft?.p50 ?? null, l.ttft?.p90 ?? null, l.ttft?.p99 ?? null]),
      tpot: latest.load.map((l) => [l.tpot?.p50 ?? null, l.tpot?.p90 ?? null, l.tpot?.p99 ?? null]),
      cdf: latest.load.map((l) => l.ttftSortedMs.map((ms, i) => ({ x: ms, y: (i + 1) / l.ttftSortedMs.length }))),
    },
    roofline: rooflineData(latest),
    compare: base === undefined ? null : {
      before: base.runId, after: latest.runId, labels: latest.parity.map((p) => p.arm),
      before_tps: latest.parity.map((p) => before(p.arm)?.tokensPerSecond ?? null), after_tps: latest.parity.map((p) => p.tokensPerSecond),
      before_strict: latest.parity.map((p) => before(p.arm)?.strict ?? null), after_strict: latest.parity.map((p) => p.strict),
    },
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
  options: { animation: false, scales: { y: { beginAtZero: true, title: { display: true, text: "tokens / s" } } } },
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
    options: { animation: false, scales: { x: { min: 0, max: 1, title: { display: true, text: "depth" } }, y: { title: { display: true, text: "L (tokens)" } } },
      plugins: { tooltip: { callbacks: { label: (c) => "L=" + c.raw.y + " depth=" + c.raw.x + ": " + c.raw.score } } } },
  }));
});
if (data.load) {
  charts.push(new Chart(document.getElementById("chart-throughput"), {
    type: "line",
    data: { labels: data.load.x, datasets: [{ label: "output tok/s", data: data.load.tps, borderColor: colours[0], backgroundColor: colours[0] }] },
    options: { animation: false, scales: { x: { title: { display: true, text: data.load.kind === "closed" ? "concurrency (clients)" : "arrival rate (req/s)" } }, y: { beginAtZero: true, title: { display: true, text: "tokens / s" } } } },
  }));
  charts.push(new Chart(document.getElementById("chart-latency"), {
    type: "bar",
    data: { labels: data.load.labels, datasets: ["p50", "p90", "p99"].flatMap((p, i) => [
      { label: "TTFT " + p, data: data.load.ttft.map((r) => r[i]), backgroundColor: colours[i] },
    ]).concat(["p50", "p90", "p99"].map((p, i) => ({ label: "TPOT " + p, data: data.load.tpot.map((r) => r[i]), backgroundColor: colours[i + 3] }))) },
    options: { animation: false, scales: { y: { beginAtZero: true, title: { display: true, text: "ms" } } } },
  }));
}
if (data.load && data.load.cdf.some((c) => c.length > 0)) {
  charts.push(new Chart(document.getElementById("chart-ttft-cdf"), {
    type: "line",
    data: { datasets: data.load.cdf.map((points, i) => ({ label: data.load.labels[i], data: points, borderColor: colours[i % colours.length], backgroundColor: colours[i % colours.length], stepped: true, pointRadius: 0 })) },
    options: { animation: false, parsing: false, scales: { x: { type: "linear", title: { display: true, text: "TTFT (ms)" } }, y: { min: 0, max: 1, title: { display: true, text: "fraction of requests" } } } },
  }));
}
if (data.compare) {
  charts.push(new Chart(document.getElementById("chart-compare"), {
    type: "bar",
    data: { labels: data.compare.labels, datasets: [
      { label: "tok/s " + data.compare.before, data: data.compare.before_tps, backgroundColor: colours[7] },
      { label: "tok/s " + data.compare.after, data: data.compare.after_tps, backgroundColor: colours[0] },
    ] },
    options: { animation: false, scales: { y: { beginAtZero: true } } },
  }));
}
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

/** A self-contained page: tables, and charts drawn by chart.js inlined from node_modules (opens offline). */
export function renderHtmlReport(runs: readonly RunView[], chartJsSource: string): string {
  const latest = runs[runs.length - 1];
  const data = chartData(runs);
  const json = JSON.stringify(data).replace(/</g, "\\u003c");
  const fixed = (v: number | null, d: number) => (v === null ? "–" : v.toFixed(d));
  const load = loadTable(latest.load);
  const kernels = kernelTable(latest.kernels);
  const sections = [
    `<h1>bringup-bench report</h1><p>Runs: ${runs.map((r) => `<code>${escape(r.runId)}</code> (exit ${r.exitCode ?? "–"})`).join(", ")}. Machine: ${escape(latest.machine)}.</p>`,
    latest.parity.length === 0 ? "" : `<h2>Single sequence (batch 1)</h2>${htmlTable(["model", "SUT arm", "ms/token", "tok/s"], latest.parity.map((p) => [p.model, p.arm, fixed(p.msPerToken, 3), fixed(p.tokensPerSecond, 1)]))}<div class="chart"><canvas id="chart-speed"></canvas></div>`,
    latest.load.length === 0
      ? `<h2>Aggregate throughput and latency</h2><p>No load points in this run (<code>bench load</code> writes them).</p>`
      : `<h2>Aggregate throughput and latency</h2>${htmlTable(load.headers, load.rows)}<div class="chart"><canvas id="chart-throughput"></canvas></div><h3>Latency percentiles</h3><div class="chart"><canvas id="chart-latency"></canvas></div>${latest.load.some((l) => l.ttftSortedMs.length > 0) ? `<h3>TTFT CDF</h3><div class="chart"><canvas id="chart-ttft-cdf"></canvas></div>` : ""}`,
    latest.parity.length === 0 ? "<h2>Parity</h2><p>No parity suites in this run.</p>" : `<h2>Parity</h2><pre>${escape(latest.parity.map((p) => p.summary).join("\n"))}</pre>${htmlTable(["SUT arm", "gate", "verdict", "STRICT", "NEAR-TIE", "FORWARD-DIVERGENT", "max gap (nats)"],
      latest.parity.map((p) => [p.arm, p.gate, p.status.toUpperCase(), fixed(p.strict, 0), fixed(p.nearTie, 0), fixed(p.forwardDivergent, 0), p.maxGapMnats === null ? "–" : (p.maxGapMnats / 1000).toFixed(3)]))}
     <h3>Gaps of divergent cells</h3><div class="chart"><canvas id="chart-gaps"></canvas></div>`,
    `<h2>Kernels</h2>${latest.kernels.length === 0 ? "<p>No kernel suites in this run.</p>" : htmlTable(kernels.headers, kernels.rows)}${data.roofline === null ? "" : `<h3>Roofline (memory roof measured in the same run)</h3><div class="chart"><canvas id="chart-roofline"></canvas></div>`}`,
    `<h2>Long context (needle in a haystack)</h2>${latest.needles.length === 0 ? "<p>No needle suites in this run.</p>" : latest.needles.map((n, i) => `<h3>${escape(n.arm)} — ${n.status.toUpperCase()}</h3><div class="chart small"><canvas id="chart-needle-${i}"></canvas></div>`).join("")}`,
    latest.dialects.length === 0 && latest.conformance.arms.length === 0 ? "" : `<h2>Servers</h2>${latest.dialects.length === 0 ? "" : `<h3>Dialects found by probing</h3>${htmlTable(["SUT arm", "dialect", ...DIALECT_CAPABILITIES], latest.dialects.map((d) => [d.arm, d.dialect, ...DIALECT_CAPABILITIES.map((c) => d.byCapability[c])]))}`}${latest.conformance.arms.length === 0 ? "" : `<h3>Conformance, side by side</h3>${htmlTable(["check", ...latest.conformance.arms], latest.conformance.rows.map((row) => [row.check, ...row.cells.map((c) => c?.status.toUpperCase() ?? "–")]))}<ul>${conformanceDifferences(latest.conformance).map((row) => `<li><b>${escape(row.check)}</b>: ${escape(row.cells.map((c, i) => `${latest.conformance.arms[i]} ${c?.status.toUpperCase() ?? "not run"}${c === undefined ? "" : ` (${c.detail})`}`).join("; "))}</li>`).join("")}</ul>`}`,
    `<h2>Trace-region demand</h2>${latest.trace.length === 0 ? "<p>No SUT in this run reports trace-region demand.</p>" : htmlTable(["SUT arm", "capture", "demand (B)", "region (B)", "semantics"], latest.trace.map((t) => [t.arm, t.capture, String(t.demand_bytes), String(t.region_bytes), t.region_semantics]))}`,
    data.compare === null ? "" : `<h2>${escape(data.compare.before)} → ${escape(data.compare.after)}</h2><div class="chart"><canvas id="chart-compare"></canvas></div>`,
  ];
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>bringup-bench report ${escape(latest.runId)}</title>
<style>body{font-family:system-ui,sans-serif;margin:2rem;max-width:1100px}table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:left}
pre{background:#f6f6f6;padding:.5rem;overflow-x:auto}.chart{position:relative;height:320px}.chart.small{height:260px;max-width:520px}</style>
<script>${chartJsSource.replace(/<\/script/gi, "<\\/script")}</script></head>
<body>${sections.join("\n")}
<script type="application/json" id="bench-data">${json}</script>
<script>${PAGE_SCRIPT}</script></body></html>
`;
}
