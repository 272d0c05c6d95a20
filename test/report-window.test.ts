import { test } from "uvu";
import * as assert from "uvu/assert";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { CHROMIUM_PATH, checkReportInBrowser, launchChromium } from "../harness/report/browser.js";
import { historyOfRuns } from "../harness/report/history.js";
import { selectRuns } from "../harness/report/select-runs.js";
import type { GateVerdict } from "../harness/results/types.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";
import { pass, writeRun } from "./helpers/history-runs.js";

// A window of four runs: the second failed, the last is a load-only pass. The report must not open green-only.
const work = temporaryDirectory("report-window");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const out = join(work.path, "report");
const outputDir = join(PACKAGE_ROOT, "test-output");

const parity = (strict: number, tokensPerSecond: number, summary?: string): GateVerdict[] => [
  pass("parity16", "F32", "greedy_parity", { strict, near_tie: 0, forward_divergent: 16 - strict, max_gap_mnats: 0, band_mnats: 500, tokens_per_second: tokensPerSecond }),
  // Q8_0's STRICT equals F32's in every run: two series on one line, which the page must still tell apart.
  { ...pass("parity16", "Q8_0", "greedy_parity", { strict, near_tie: 0, forward_divergent: 16 - strict, max_gap_mnats: 0, band_mnats: 500, tokens_per_second: tokensPerSecond / 2 }, "informational"),
    ...(summary === undefined ? {} : { summary }) },
];
const failed: GateVerdict = { suite: "parity16", arm: "F32", check: "greedy_parity", gate: "required", status: "fail", summary: "F32 correctness gate: 12/16 prompts PASS", metrics: { strict: 12, near_tie: 0, forward_divergent: 4, max_gap_mnats: 900, band_mnats: 500, tokens_per_second: 100 } };
const LONG_WORD = "x".repeat(400);

test.before(async () => {
  await writeRun(runs, "w1", parity(16, 100));
  await writeRun(runs, "w2", [failed, parity(16, 100)[1]]);
  await writeRun(runs, "w3", parity(16, 104, `Q8_0 correctness gate (informational): a line longer than any page ${LONG_WORD}`));
  await writeRun(runs, "w4", [pass("load", "concurrency 1", "load", { output_tokens_per_second: 30, ttft_p99_ms: 100, tpot_p99_ms: 10 })]);
});

test("the verdict names the newest run and, beside it, the failing run in the middle of the window with its gate", () => {
  const history = historyOfRuns(selectRuns([runs], runs, undefined).runs, undefined, []);
  assert.is(history.verdict.runId, "w4");
  assert.is(history.verdict.word, "PASS");
  assert.equal(history.verdict.earlierNotPassed, [{ runId: "w2", word: "FAIL", exitCode: 1, gates: ["parity16/F32/greedy_parity"] }]);
  assert.is(bench(["report", runs, "--out", out]).status, 0);
  const markdown = readFileSync(join(out, "report.md"), "utf8");
  assert.match(markdown, /^## Verdict: PASS \(exit 0\) — run w4 on machine 1 \([^)]*\); earlier in this window, not passed: run w2 FAIL: parity16\/F32\/greedy_parity$/m);
  assert.match(markdown, /\*\*Earlier runs of this window that did not pass \(1 of 3\):\*\*\n\n- run w2 FAIL: parity16\/F32\/greedy_parity\n/);
  const html = readFileSync(join(out, "report.html"), "utf8");
  assert.match(html, /<section class="verdict mixed"><h2>Verdict: PASS \(exit 0\) — run w4 on machine 1 \([^)]*\); earlier in this window, not passed: run w2 FAIL: parity16\/F32\/greedy_parity<\/h2>/);
});

test("the history document carries the earlier runs that did not pass", () => {
  const document = JSON.parse(readFileSync(join(out, "history.json"), "utf8"));
  assert.equal(document.verdict.earlier_not_passed, [{ run_id: "w2", verdict: "FAIL", exit_code: 1, gates: ["parity16/F32/greedy_parity"] }]);
});

const haveChromium = existsSync(CHROMIUM_PATH);
(haveChromium ? test : test.skip)("in a real browser: short series are tables, equal series are labelled apart, one band per selected series, wide lines stay in their box", async () => {
  const page = join(out, "report.html");
  mkdirSync(outputDir, { recursive: true });
  const check = await checkReportInBrowser(page, join(outputDir, "report-window.png"));
  assert.equal(check.consoleErrors, []);
  // Trends with three runs or more (parity STRICT, max gap, speed: 3 points each) are charts; the load
  // point (one run) is three small tables. The latest run adds its throughput chart and its latency percentiles.
  const html = readFileSync(page, "utf8");
  assert.is((html.match(/<canvas id="chart-trend-/g) ?? []).length, 3);
  assert.is((html.match(/Fewer than 3 runs per series: a table, not a chart\./g) ?? []).length, 3);
  assert.is(check.canvases, check.paintedCanvases);
  const browser = await launchChromium();
  try {
    const tab = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    await tab.goto(`file://${page}`);
    await tab.waitForFunction(() => (window as unknown as { benchChartsRendered?: number }).benchChartsRendered !== undefined);
    type Drawn = { bands: number[]; labels: string[]; datasets: number };
    const drawn = (id: string) => tab.evaluate((canvasId) => {
      const chart = (window as unknown as { Chart: { getChart(c: HTMLElement): { $bandsDrawn: number[]; $directLabels: string[]; data: { datasets: unknown[] } } } }).Chart.getChart(document.getElementById(canvasId)!);
      return { bands: chart.$bandsDrawn, labels: chart.$directLabels, datasets: chart.data.datasets.length };
    }, id) as Promise<Drawn>;
    const strictChart = await tab.evaluate(() => [...document.querySelectorAll("h3")].findIndex((h) => h.textContent!.startsWith("Parity: STRICT prompts per arm")));
    assert.ok(strictChart >= 0);
    const strict = await drawn(`chart-trend-${strictChart}`);
    assert.equal(strict, { bands: [0], labels: ["parity16/F32", "parity16/Q8_0"], datasets: 2 }, "one band, and both equal series named on the chart");
    await tab.selectOption(`#band-for-${strictChart}`, "1");
    assert.equal((await drawn(`chart-trend-${strictChart}`)).bands, [1], "the band follows the selection");
    // A report of w3 alone: one run, so every trend is a table, and its parity lines hold the long one.
    const single = join(work.path, "single");
    assert.is(bench(["report", join(runs, "w3"), "--out", single]).status, 0);
    const singleHtml = readFileSync(join(single, "report.html"), "utf8");
    assert.not.match(singleHtml, /<canvas id="chart-trend-/, "a one-run report draws no trend chart");
    assert.ok((singleHtml.match(/a table, not a chart/g) ?? []).length >= 3, "a one-run report: small tables");
    await tab.goto(`file://${join(single, "report.html")}`);
    await tab.waitForFunction(() => (window as unknown as { benchChartsRendered?: number }).benchChartsRendered !== undefined);
    const overflowing = await tab.evaluate(() => [...document.querySelectorAll("pre")].filter((pre) => pre.scrollWidth > pre.clientWidth || pre.getBoundingClientRect().right > document.body.getBoundingClientRect().right + 1).length);
    const longest = await tab.evaluate(() => Math.max(...[...document.querySelectorAll("pre")].map((pre) => pre.textContent!.length)));
    assert.ok(longest > 400, "the page holds the long line");
    assert.is(overflowing, 0, "a wide <pre> line wraps inside its box");
  } finally {
    await browser.close();
  }
});

test.run();
