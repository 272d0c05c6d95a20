import { test } from "uvu";
import * as assert from "uvu/assert";
import { existsSync, mkdirSync, readFileSync, writeFileSync, cpSync } from "node:fs";
import { join } from "node:path";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { CHROMIUM_PATH, checkReportInBrowser } from "../harness/report/browser.js";
import { tableFromIPC } from "apache-arrow";
import type { RunOptions } from "../harness/runner/run-options.js";
import { describeRun, runInProcess, type InProcessRun } from "./helpers/in-process-run.js";
import { bench, temporaryDirectory, type CliResult } from "./helpers/workspace.js";

const work = temporaryDirectory("report-gate");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const baseline = join(work.path, "baseline.json");
const outputDir = join(PACKAGE_ROOT, "test-output");

/** A copy of a committed suite with its arms replaced, keeping its name (so its goldens apply). */
function suiteVariant(suite: string, file: string, arms: unknown[]): string {
  const data = JSON.parse(readFileSync(join(PACKAGE_ROOT, "suites", `${suite}.json`), "utf8"));
  delete data.$schema;
  data.arms = arms;
  const path = join(work.path, file);
  writeFileSync(path, JSON.stringify(data));
  return path;
}

const runResults = new Map<string, CliResult>();

/** `bench run` into this file's runs directory; its exit status, and its output kept for the tests that read the same run. */
function run(runId: string, args: string[]): number | null {
  const result = bench(["run", "--runs-dir", runs, "--run-id", runId, ...args]);
  runResults.set(runId, result);
  return result.status;
}

const inProcessResults = new Map<string, InProcessRun>();

/** The same in this process (helpers/in-process-run.ts), for the runs only the gate and report read: the CLI's own output is tried on the good run. */
async function runHere(runId: string, options: RunOptions): Promise<number> {
  const result = await runInProcess(runs, runId, options);
  inProcessResults.set(runId, result);
  return result.code;
}

function summaryOf(runId: string) {
  return JSON.parse(readFileSync(join(runs, runId, "summary.json"), "utf8"));
}

function gate(args: string[], env: Record<string, string> = {}) {
  return bench(["gate", "--runs-dir", runs, "--baseline", baseline, ...args], env);
}

test("real runs for the gate: a good one, and the same arm labels with planted faults", async () => {
  assert.is(run("good", ["--suite", "parity16", "--suite", "niah", "--arm", "F32", "--arm", "Q8_0", "--arm", "copy-4k", "--niah-case", "4000:0.25:0", "--niah-case", "4000:0.75:0"]), 0);
  const perturbed = suiteVariant("parity16", "parity-perturbed.json", [
    { label: "F32", model: "tiny-random-perturbed-layer", gate: "informational" },
    { label: "Q8_0", model: "tiny-random:Q8_0", gate: "informational" },
  ]);
  assert.is(await runHere("strict-drop", { suites: [perturbed] }), 77, "nothing required ran in that variant");
  const required = suiteVariant("parity16", "parity-required.json", [{ label: "Q8_0", model: "tiny-random:Q4_K", gate: "required" }]);
  assert.is(await runHere("divergent-required", { suites: [required] }), 1);
  const truncated = suiteVariant("niah", "niah-truncated.json", [
    { label: "copy-4k", model: "copy-4k", settings: { threads: 2, context_size: 2048, prompt_overflow: "truncate-left" }, gate: "required" },
  ]);
  assert.is(await runHere("needle-lost", { suites: [truncated], niahCases: ["4000:0.25:0", "4000:0.75:0"] }), 1);
});

// The end-to-end checks of a clean run and of a planted needle fault read the runs above (each made once for this whole file).
test("bench run on the clean model: exit 0, summary line, every result file written and consistent", () => {
  const result = runResults.get("good")!;
  assert.is(result.status, 0, result.stdout + result.stderr);
  assert.match(result.stdout, /^F32 correctness gate: 16\/16 prompts PASS \(STRICT 16\/16; near-tie-band only 0\/16; max gap 0\.000 nats; 0 forward-divergent\)$/m);
  assert.match(result.stdout, /^Q8_0 correctness gate \(informational\): 16\/16 prompts PASS \(STRICT \d+\/16; near-tie-band only \d+\/16; max gap 0\.\d+ nats @ prompt\[\d+\] tok=\d+; 0 forward-divergent\)$/m);
  const summary = summaryOf("good");
  assert.is(summary.status, "complete");
  assert.is(summary.exit_code, 0);
  assert.is(summary.counts.required_failed, 0);
  assert.ok(summary.suts.every((s: { provenance: { modelSha256: string } }) => /^[0-9a-f]{64}$/.test(s.provenance.modelSha256)));
  const cells = tableFromIPC(readFileSync(join(runs, "good", "cells.arrow")));
  assert.is(cells.numRows, summary.cells);
  const parityCells = cells.toArray().filter((r) => r.check === "greedy_parity" && r.arm === "F32");
  assert.is(parityCells.length, 256, "16 prompts × 16 positions");
  assert.ok(parityCells.every((r) => r.status === "pass" && r.gap_mnats === 0));
  assert.match(readFileSync(join(runs, "good", "junit.xml"), "utf8"), /<testsuite name="parity16" tests="\d+" failures="0"/);
  assert.match(readFileSync(join(runs, "good", "summary.md"), "utf8"), /\| parity16 \| Q8_0 \| greedy_parity \| informational \| PASS \|/);
});

test("planted fault: context truncated below the needle — N at early depths, Y where the needle survives, exit 1", () => {
  const result = inProcessResults.get("needle-lost")!;
  assert.is(result.code, 1, describeRun(result));
  const needleCells: Array<{ check: string; niah_depth: number; prompt_class: string }> = readFileSync(join(runs, "needle-lost", "cells.jsonl"), "utf8").trim().split("\n").map((line) => JSON.parse(line));
  const byDepth = Object.fromEntries(needleCells.filter((c) => c.check === "niah").map((c) => [c.niah_depth, c.prompt_class]));
  assert.equal(byDepth, { 0.25: "N", 0.75: "Y" });
});

test("bench gate --update writes the baseline from a run and prints its diff; the same run then passes", () => {
  const update = gate(["good", "--update"]);
  assert.is(update.status, 0, update.stderr);
  assert.match(update.stdout, /updated from run good:\n\+ \{/);
  const written = JSON.parse(readFileSync(baseline, "utf8"));
  assert.equal(written.parity["parity16/F32"], { strict: 16, forward_divergent: 0 });
  assert.equal(written.needles["niah/copy-4k"], ["4000:0.25:0", "4000:0.75:0"]);
  assert.ok(written.perf["parity16/F32/tokens_per_second"].target > 0);
  assert.match(gate(["good", "--update"]).stdout, /unchanged/);
  const pass = gate(["good"]);
  assert.is(pass.status, 0, pass.stdout);
  assert.match(pass.stdout, /^ok {4}parity16\/F32: STRICT 16 \(baseline 16\)/m);
  assert.match(pass.stdout, /PASS \(exit 0\)/);
});

test("bench gate --update refuses a run that did not pass (exit 2, one line); --accept-failing takes it and says so at every gate", () => {
  const taken = join(work.path, "from-failing.json");
  const before = readFileSync(baseline, "utf8");
  const failing = gate(["divergent-required", "--update"]);
  assert.is(failing.status, 2, failing.stdout + failing.stderr);
  assert.is(readFileSync(baseline, "utf8"), before, "a refused update leaves the baseline as it was");
  assert.is(failing.stderr.trim().split("\n").length, 1, failing.stderr);
  assert.match(failing.stderr, /runs\/divergent-required: not a baseline: run divergent-required is complete with exit 1: \d+ required verdicts? did not pass \(\d+ FAIL[^)]*\); a baseline is taken only from a passing run \(fix: make the run pass and re-run it, or take it anyway with --update --accept-failing/, failing.stderr);
  const skipped = bench(["gate", "strict-drop", "--runs-dir", runs, "--baseline", taken, "--update"]);
  assert.is(skipped.status, 2, skipped.stdout + skipped.stderr);
  assert.match(skipped.stderr, /run strict-drop is complete with exit 77: no required verdict ran/);
  assert.not.ok(existsSync(taken), "nothing written");
  const accepted = bench(["gate", "divergent-required", "--runs-dir", runs, "--baseline", taken, "--update", "--accept-failing"]);
  assert.is(accepted.status, 0, accepted.stdout + accepted.stderr);
  assert.match(accepted.stderr, /warning: .*from-failing\.json taken from a run that did not pass: run divergent-required is complete with exit 1/);
  assert.match(JSON.parse(readFileSync(taken, "utf8")).accepted_failing, /^run divergent-required is complete with exit 1: \d+ required verdicts? did not pass \(\d+ FAIL[^)]*\)$/);
  const held = bench(["gate", "good", "--runs-dir", runs, "--baseline", taken]);
  assert.match(held.stdout, /^WARN {2}baseline: taken from a run that did not pass \(--accept-failing\): run divergent-required/m);
  assert.is(bench(["gate", "good", "--runs-dir", runs, "--baseline", taken, "--strict"]).status, 1);
  // A passing run replaces it, and the mark goes with it.
  assert.is(bench(["gate", "good", "--runs-dir", runs, "--baseline", taken, "--update"]).status, 0);
  assert.is(JSON.parse(readFileSync(taken, "utf8")).accepted_failing, undefined);
  const misplaced = bench(["gate", "good", "--runs-dir", runs, "--baseline", taken, "--accept-failing"]);
  assert.is(misplaced.status, 2);
  assert.match(misplaced.stderr, /--accept-failing only applies to --update/);
});

test("parity ratchets: STRICT may not drop; FORWARD-DIVERGENT must be 0 on required arms", () => {
  const drop = gate(["strict-drop"]);
  assert.is(drop.status, 1, drop.stdout);
  assert.match(drop.stdout, /^FAIL {2}parity16\/F32: STRICT dropped 16 → 0$/m);
  const divergent = gate(["divergent-required"]);
  assert.is(divergent.status, 1);
  assert.match(divergent.stdout, /^FAIL {2}parity16\/Q8_0: 16 FORWARD-DIVERGENT prompts on a required arm \(must be 0\)$/m);
});

test("the needle grid may not lose a Y", () => {
  const lost = gate(["needle-lost"]);
  assert.is(lost.status, 1);
  assert.match(lost.stdout, /^FAIL {2}niah\/copy-4k: needle grid lost Y at 4000:0\.25:0$/m);
});

test("speed is gated as a ratio to the reference arm of the same run: below fails, far above warns 'update the target'; the reference's own speed only warns", () => {
  const original = readFileSync(baseline, "utf8");
  const data = JSON.parse(original);
  const key = "parity16/Q8_0/tokens_per_second";
  const reference = "parity16/F32/tokens_per_second";
  assert.is(data.speed_ratios[key].reference, reference);
  const escaped = (k: string) => k.replace(/\//g, "\\/");
  data.speed_ratios[key].target *= 10;
  writeFileSync(baseline, JSON.stringify(data));
  const slow = gate(["good"]);
  assert.is(slow.status, 1);
  assert.match(slow.stdout, new RegExp(`^FAIL {2}${escaped(key)}: × ${escaped(reference)} in this run: [\\d.]+ is below the band: target [\\d.]+ − 50% = [\\d.]+ \\(absolute [\\d.]+, not gated\\)$`, "m"));
  data.speed_ratios[key].target /= 100;
  writeFileSync(baseline, JSON.stringify(data));
  const fast = gate(["good"]);
  assert.is(fast.status, 0);
  assert.match(fast.stdout, new RegExp(`^WARN {2}${escaped(key)}: × ${escaped(reference)} in this run: [\\d.]+ is far above the target [\\d.]+ .*\\(hint: update the target`, "m"));
  // The reference ran 10× slower than its band (a busy machine): reported, the ratios still gated.
  const busy = JSON.parse(original);
  busy.perf[reference].target *= 10;
  writeFileSync(baseline, JSON.stringify(busy));
  const loaded = gate(["good"]);
  assert.is(loaded.status, 0, loaded.stdout);
  assert.match(loaded.stdout, new RegExp(`^WARN {2}${escaped(reference)}: reference speed [\\d.]+ is below the band: .*the machine was busier than when the baseline was taken`, "m"));
  writeFileSync(baseline, original);
});

test("a gated metric missing from the baseline warns, and fails under --strict", () => {
  const data = JSON.parse(readFileSync(baseline, "utf8"));
  delete data.parity["parity16/Q8_0"];
  const partial = join(work.path, "partial.json");
  writeFileSync(partial, JSON.stringify(data));
  const lenient = bench(["gate", "good", "--runs-dir", runs, "--baseline", partial]);
  assert.is(lenient.status, 0);
  assert.match(lenient.stdout, /^WARN {2}parity16\/Q8_0: no baseline entry for parity \(hint: run `bench gate --update` to record it\)$/m);
  const strict = bench(["gate", "good", "--runs-dir", runs, "--baseline", partial, "--strict"]);
  assert.is(strict.status, 1);
});

test("trace-region demand: an increase beyond tolerance fails with 'stop and report'", () => {
  // FAKE injection: no embedded SUT captures a trace, so the demand is written into a copy of a real run.
  const traced = join(runs, "traced");
  cpSync(join(runs, "good"), traced, { recursive: true });
  const summary = JSON.parse(readFileSync(join(traced, "summary.json"), "utf8"));
  summary.run_id = "traced";
  summary.trace = [{ suite: "parity16", arm: "F32", capture: "decode", demand_bytes: 13484032, region_bytes: 52428800, region_semantics: "fixed-total" }];
  writeFileSync(join(traced, "summary.json"), JSON.stringify(summary));
  const data = JSON.parse(readFileSync(baseline, "utf8"));
  data.trace["parity16/F32/decode"] = { demand_bytes: 13484032, tolerance: 0 };
  writeFileSync(baseline, JSON.stringify(data));
  assert.is(gate(["traced"]).status, 0);
  summary.trace[0].demand_bytes = 425754624;
  writeFileSync(join(traced, "summary.json"), JSON.stringify(summary));
  const grew = gate(["traced"]);
  assert.is(grew.status, 1);
  assert.match(grew.stdout, /^FAIL {2}parity16\/F32\/decode: trace-region demand rose 13484032 → 425754624 B: stop and report$/m);
});

test("under GitHub Actions: ::error:: annotations and a step summary", () => {
  const stepSummary = join(work.path, "step-summary.md");
  const result = gate(["strict-drop"], { GITHUB_ACTIONS: "true", GITHUB_STEP_SUMMARY: stepSummary });
  assert.match(result.stdout, /^::error title=bench gate parity16\/F32::STRICT dropped 16 → 0$/m);
  assert.match(readFileSync(stepSummary, "utf8"), /### bench gate: strict-drop against .* — exit 1/);
});

test("bench report: Markdown tables and an offline HTML page from real runs; two runs ordered by start time, whatever order they are named in", () => {
  const single = join(work.path, "report-good");
  assert.is(bench(["report", "good", "--runs-dir", runs, "--out", single]).status, 0);
  const good = readFileSync(join(single, "report.md"), "utf8");
  assert.match(good, /^# bringup-bench report\n\n## Verdict: PASS \(exit 0\) — run good on machine 1/);
  assert.match(good, /\| model \| SUT arm \| ms\/token \| tok\/s \|/);
  assert.match(good, /F32 correctness gate: 16\/16 prompts PASS/);
  assert.match(good, /\| 4000 \| Y \| Y \|/);
  const out = join(work.path, "report");
  const result = bench(["report", "strict-drop", "good", "--runs-dir", runs, "--out", out]);
  assert.is(result.status, 0, result.stderr);
  const markdown = readFileSync(join(out, "report.md"), "utf8");
  assert.match(markdown, /^# bringup-bench report\n\n## Verdict: SKIPPED — NOT A PASS \(exit 77\) — run strict-drop/);
  assert.match(markdown, /\| 1 \| good \|[^\n]*\n\| 2 \| strict-drop \|/);
  assert.match(markdown, /\| parity16\/F32\/strict \| machine 1 \| worse \(below band\) \| strict-drop \| 16 → 0 prompts \| yes \|/);
  const html = readFileSync(join(out, "report.html"), "utf8");
  assert.not.match(html, /<script[^>]+src=/, "no external scripts: the page opens offline");
  assert.match(html, /Chart\.js v4/);
});

const haveChromium = existsSync(CHROMIUM_PATH);
(haveChromium ? test : test.skip)("the HTML report renders in a real browser: every chart drawn, no console errors (screenshot kept)", async () => {
  mkdirSync(outputDir, { recursive: true });
  const screenshot = join(outputDir, "report.png");
  const check = await checkReportInBrowser(join(work.path, "report", "report.html"), screenshot);
  const series: { kind: string; points: unknown[] }[] = JSON.parse(readFileSync(join(work.path, "report", "history.json"), "utf8")).series;
  // A kind is charted when one of its series has three runs or more; the others are small tables.
  const charted = new Set(series.filter((s) => s.points.length >= 3).map((s) => s.kind)).size;
  const tabled = new Set(series.map((s) => s.kind)).size - charted;
  assert.is((readFileSync(join(work.path, "report", "report.html"), "utf8").match(/a table, not a chart\./g) ?? []).length, tabled);
  const charts = charted + 2;
  assert.equal(check.consoleErrors, []);
  assert.is(check.chartsRendered, charts, "a trend chart per tracked kind with three runs or more, then the latest run's speed and gap histogram");
  assert.is(check.canvases, charts);
  assert.is(check.paintedCanvases, charts);
  assert.is(check.chartsWithData, charts);
  assert.ok(existsSync(screenshot));
  console.log(`  screenshot: ${screenshot}`);
});

test("a bench load run reports throughput versus concurrency, latency percentiles and the TTFT CDF, drawn in the browser", async () => {
  const load = bench(["load", "--model", "tiny-random", "--concurrency", "1,2", "--requests", "6", "--output-tokens", "8", "--runs-dir", runs, "--run-id", "load"]);
  assert.is(load.status, 0, load.stdout + load.stderr);
  const out = join(work.path, "load-report");
  assert.is(bench(["report", "load", "--runs-dir", runs, "--out", out]).status, 0);
  const markdown = readFileSync(join(out, "report.md"), "utf8");
  assert.match(markdown, /\| concurrency 2 \| [\d.]+ \| [\d.]+× \| [\d.]+ \| [\d.]+ \/ [\d.]+ \| [\d.]+ \/ [\d.]+ \| 0 \| \d+% \| – \|$/m);
  if (!haveChromium) return;
  const check = await checkReportInBrowser(join(out, "report.html"), join(outputDir, "load-report.png"));
  assert.equal(check.consoleErrors, []);
  // The load point's throughput, TTFT p99 and TPOT p99 trends have one run each: tables, not charts.
  assert.is((readFileSync(join(out, "report.html"), "utf8").match(/a table, not a chart\./g) ?? []).length, 3);
  assert.is(check.chartsRendered, 3, "throughput versus concurrency, latency percentiles, TTFT CDF");
  assert.is(check.paintedCanvases, 3);
  assert.is(check.chartsWithData, 3);
});

test("bench gate holds load points to their bands: throughput higher is better, TTFT and TPOT lower", () => {
  const loadBaseline = join(work.path, "load-baseline.json");
  const gateLoad = () => bench(["gate", "load", "--runs-dir", runs, "--baseline", loadBaseline]);
  assert.is(bench(["gate", "load", "--runs-dir", runs, "--baseline", loadBaseline, "--update"]).status, 0);
  const data = JSON.parse(readFileSync(loadBaseline, "utf8"));
  const ttft = "load/concurrency 2/ttft_p99_ms";
  const throughput = "load/concurrency 2/output_tokens_per_second";
  assert.is(data.perf[ttft].better, "lower");
  assert.is(data.perf[throughput].better, undefined, "higher is the default");
  assert.ok(data.perf["load/concurrency 1/tpot_p50_ms"].target > 0);
  assert.is(gateLoad().status, 0);
  data.perf[ttft].target /= 10;
  writeFileSync(loadBaseline, JSON.stringify(data));
  const slower = gateLoad();
  assert.is(slower.status, 1);
  assert.match(slower.stdout, /^FAIL {2}load\/concurrency 2\/ttft_p99_ms: [\d.]+ is above the band \(lower is better\)/m);
  data.perf[ttft].target *= 100;
  data.perf[throughput].target *= 10;
  writeFileSync(loadBaseline, JSON.stringify(data));
  const mixed = gateLoad();
  assert.is(mixed.status, 1);
  assert.match(mixed.stdout, /^WARN {2}load\/concurrency 2\/ttft_p99_ms: [\d.]+ is far below the target [\d.]+ \(lower is better\) \(hint: update the target/m);
  assert.match(mixed.stdout, /^FAIL {2}load\/concurrency 2\/output_tokens_per_second: [\d.]+ is below the band/m);
});

test.run();
