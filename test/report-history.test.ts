import { test } from "uvu";
import * as assert from "uvu/assert";
import { cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { assertMatchesSchema } from "../harness/io/json-schema.js";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { CHROMIUM_PATH, checkReportInBrowser } from "../harness/report/browser.js";
import { HISTORY_SCHEMA, historyOfRuns, type History } from "../harness/report/history.js";
import { selectRuns } from "../harness/report/select-runs.js";
import { buildTrends } from "../harness/report/trends.js";
import { readBaseline } from "../harness/gates/baseline.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";
import { knownValues, runId, writeTenRuns } from "./helpers/history-runs.js";

const work = temporaryDirectory("report-history");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const outputDir = join(PACKAGE_ROOT, "test-output");

const seriesOf = (history: History, key: string) => history.trends.series.filter((s) => s.key === key);
const runIdsOf = (history: History) => history.trends.runs.map((r) => r.runId);

test.before(async () => {
  await writeTenRuns(runs);
});

test("ten runs are ordered by their recorded start time, whatever order they are named in", () => {
  const shuffled = [3, 10, 1, 7, 2, 9, 4, 6, 8, 5].map(runId);
  const { runs: selected } = selectRuns(shuffled, runs, undefined);
  assert.equal(selected.map((r) => r.summary.run_id), Array.from({ length: 10 }, (_, i) => runId(i + 1)));
  assert.equal(selectRuns([runs], runs, undefined).runs.map((r) => r.summary.run_id), selected.map((r) => r.summary.run_id), "a directory of runs");
  assert.equal(selectRuns([], runs, 4).runs.map((r) => r.summary.run_id), [7, 8, 9, 10].map(runId), "--last 4");
});

test("trend data: one series per quantity and machine, holding the known values", () => {
  const { runs: selected } = selectRuns([runs], runs, undefined);
  const history = historyOfRuns(selected, undefined, []);
  assert.equal(history.trends.runs.map((r) => r.machine), [...Array(7).fill("machine 1"), ...Array(3).fill("machine 2")]);
  assert.is(history.trends.machines.length, 2);
  assert.match(history.trends.machines[1].fingerprint, /64 × Other CPU, 256 GiB, linux-arm64/);

  const speed = seriesOf(history, "parity16/Q8_0/tokens_per_second");
  assert.equal(speed.map((s) => s.machine), ["machine 1", "machine 2"], "the machine change splits the series");
  assert.equal(speed[0].points.map((p) => [runIdsOf(history)[p.run], p.value]), [1, 2, 3, 4, 5, 6, 7].map((i) => [runId(i), knownValues(i).q8TokensPerSecond]));
  assert.equal(speed[1].points.map((p) => p.value), [20, 20, 20]);
  assert.equal(speed[0].band, { low: 25, high: 100, source: runId(1) }, "default band: −50% / +100% around the first run");
  assert.equal(speed[1].band.source, runId(8), "the second machine's band is taken around its own first run");
  assert.equal(speed[0].points.map((p) => p.state), ["within", "within", "within", "within", "within", "below", "below"]);

  const f32 = seriesOf(history, "parity16/F32/tokens_per_second");
  assert.equal(f32.flatMap((s) => s.points.map((p) => p.value)), [101, 102, 103, 104, 105, 106, 107, 108, 109, 110]);
  const kinds = new Set(history.trends.series.map((s) => s.kind));
  assert.equal([...kinds].sort(), ["batch1_tokens_per_second", "kernel_us_per_call", "kernel_worst_ratio", "load_output_tokens_per_second", "load_tpot_p99_ms", "load_ttft_p99_ms",
    "needle_y", "parity_max_gap_nats", "parity_strict", "peak_memory_bytes", "teacher_forced_kld_mean", "trace_demand_bytes"]);
  const memory = seriesOf(history, "parity16/F32/CPU/peak_bytes");
  assert.equal(memory[0].points.map((p) => p.value), [1, 2, 3, 4, 5, 6, 7].map((i) => 5_976_883 + knownValues(i).kvCacheBytes), "an arm's peak is its groups' peaks added up");
  assert.equal(memory[0].points.map((p) => p.state), ["within", "within", "within", "above", "above", "above", "above"], "bytes are exact: the KV growth at run 4 leaves the band");
  assert.equal(seriesOf(history, "parity16/Q8_0/max_gap_nats")[0].points[0].value, 0.3);
  assert.equal(seriesOf(history, "owned-kernels/reference/rms_norm/worst_ratio")[0].points[0].value, 0.2);
  assert.equal(seriesOf(history, "owned-kernels/reference/RMS_NORM(rows=4,cols=64,seed=1)/us_per_call")[0].points[0].value, 10);
  const kld = seriesOf(history, "parity16/Q8_0/kld_topk_mean");
  assert.is(kld[1].points.length, 2, "run 10 skipped it: a gap, not a zero");
});

test("the change table: the KV growth at run 4, the regression at run 6 and the trace rise at run 9, each attributed to its first run", () => {
  const history = historyOfRuns(selectRuns([runs], runs, undefined).runs, undefined, []);
  const changes = history.trends.changes.map((c) => [c.key, c.machine, c.direction, c.state, c.firstRun, c.previousRun, c.before, c.after, c.ongoing]);
  assert.equal(changes, [
    ["parity16/F32/CPU/peak_bytes", "machine 1", "worse", "above", runId(4), runId(3), 5_976_883 + 2_097_152, 5_976_883 + 4_194_304, true],
    ["parity16/Q8_0/tokens_per_second", "machine 1", "worse", "below", runId(6), runId(5), 50, 20, true],
    ["parity16/Q8_0/strict", "machine 1", "worse", "below", runId(6), runId(5), 16, 12, true],
    ["parity16/F32/decode/demand_bytes", "machine 2", "worse", "above", runId(9), runId(8), 1_000_000, 2_000_000, true],
  ]);
  assert.is(history.verdict.runId, runId(10));
  assert.is(history.verdict.word, "PASS");
  assert.equal(history.verdict.notPassed, [{ gate: "informational", status: "skip", what: "parity16/Q8_0/teacher_forced", why: "the goldens hold no log-probs" }]);
  assert.equal(history.verdict.moved, [], "nothing left its band between runs 9 and 10");
});

test("the verdict of a history ending at run 6 names what moved since run 5; one ending at run 8 says the machine changed", () => {
  const upTo = (n: number) => historyOfRuns(selectRuns(Array.from({ length: n }, (_, i) => runId(i + 1)), runs, undefined).runs, undefined, []);
  assert.equal(upTo(6).verdict.moved.map((c) => [c.key, c.firstRun]), [["parity16/Q8_0/tokens_per_second", runId(6)], ["parity16/Q8_0/strict", runId(6)]]);
  assert.equal(upTo(8).verdict.previous, { runId: runId(7), machine: "machine 1", sameMachine: false });
});

test("a quantity that comes back: the regression is no longer ongoing, and its return is a change of its own", () => {
  const machine = { hostname: "h", platform: "linux", arch: "x64", cpus: 2, cpu_model: "CPU", memory_bytes: 2 ** 30, node: "v20" };
  const values = [10, 4, 4, 10];
  const trends = buildTrends(values.map((value, i) => ({
    runId: `run-${i}`, started: `2026-11-30T00:00:0${i}Z`, status: "complete", exitCode: 0, machine, quantities: [{ kind: "batch1_tokens_per_second" as const, subject: "s/a", value }],
  })));
  assert.equal(trends.changes.map((c) => [c.direction, c.firstRun, c.before, c.after, c.ongoing]), [["worse", "run-1", 10, 4, false], ["back within band", "run-3", 4, 10, true]]);
});

test("--baseline draws bench gate's bands: a series on the new machine that starts outside is a change with no previous run", () => {
  const file = join(work.path, "baseline.json");
  writeFileSync(file, JSON.stringify({
    schema_version: 1, name: "history-test", from_run: runId(1), needles: {}, trace: {},
    parity: { "parity16/Q8_0": { strict: 16, forward_divergent: 0 } },
    perf: { "parity16/F32/tokens_per_second": { target: 100, tolerance: 0.02 } },
  }));
  const history = historyOfRuns(selectRuns([runs], runs, undefined).runs, { file, baseline: readBaseline(file) }, []);
  const f32 = seriesOf(history, "parity16/F32/tokens_per_second");
  assert.equal(f32[0].band, { low: 98, high: 104, source: "baseline" });
  const f32Changes = history.trends.changes.filter((c) => c.key === "parity16/F32/tokens_per_second").map((c) => [c.machine, c.direction, c.firstRun, c.previousRun]);
  assert.equal(f32Changes, [["machine 1", "better", runId(5), runId(4)], ["machine 2", "better", runId(8), null]]);
  assert.equal(seriesOf(history, "parity16/Q8_0/strict")[1].points.map((p) => p.state), ["below", "below", "below"], "the ratchet's floor holds on every machine");
});

test("bench report over a directory of ten runs: verdict first, the change table, trends, and history.json valid against its schema", () => {
  const out = join(work.path, "report");
  const result = bench(["report", runs, "--runs-dir", runs, "--out", out]);
  assert.is(result.status, 0, result.stderr);
  const markdown = readFileSync(join(out, "report.md"), "utf8");
  assert.match(markdown, /^# bringup-bench report\n\n## Verdict: PASS \(exit 0\) — run r10-history on machine 2/);
  assert.match(markdown, /\*\*Did not pass:\*\*\n\n- informational SKIPPED — NOT A PASS parity16\/Q8_0\/teacher_forced: the goldens hold no log-probs/);
  assert.match(markdown, /\*\*Moved beyond \(or back within\) its band since the previous run r9-history:\*\* Nothing moved beyond its band\./);
  assert.match(markdown, /\| 8 \| r8-history \| [^|]+ \| machine 2 \(machine changed\) \| 0 \|/);
  assert.match(markdown, /\| parity16\/Q8_0\/tokens_per_second \| machine 1 \| worse \(below band\) \| r6-history \| 50 → 20 tok\/s \| yes \|/);
  assert.match(markdown, /### Batch-1 speed per SUT arm \(tok\/s, higher is better\)/);
  assert.match(markdown, /\| parity16\/Q8_0 \| machine 1 \| 7 \| 25 – 100 \(around r1-history\) \| 50 \(r1-history\) \| 20 \(r7-history\) \| █████▁▁ \| r6-history, r7-history \|/);
  assert.not.match(markdown, /\|---\|[^\n]*\n\n/, "no header-only table");
  assert.not.match(markdown, /```\n```/, "no empty code block");
  const document = JSON.parse(readFileSync(join(out, "history.json"), "utf8"));
  assertMatchesSchema(document, HISTORY_SCHEMA, "history.json");
  assert.equal(document.changes.map((c: { first_run: string }) => c.first_run), [runId(4), runId(6), runId(6), runId(9)]);
  assert.match(markdown, /### Memory by category\n\n[^\n]+\n\n\| model \| suite \| SUT arm \| device \| group \| peak \| steady \| predicted peak \| peak of predicted \|\n\|[-|]+\|\n\| tiny-random-F32 \| parity16 \| F32 \| CPU \| weights \| 5\.70 MiB \| 5\.70 MiB \| 5\.70 MiB \| 100\.1% \|\n\| tiny-random-F32 \| parity16 \| F32 \| CPU \| kv_cache \| 4\.00 MiB \| 4\.00 MiB \| 2\.00 MiB \| 200\.0% \|/);
  assert.is(document.runs.length, 10);
});

test("a single run: every history section says it has nothing to compare rather than showing an empty table", () => {
  const out = join(work.path, "single");
  assert.is(bench(["report", runId(1), "--runs-dir", runs, "--out", out]).status, 0);
  const markdown = readFileSync(join(out, "report.md"), "utf8");
  assert.match(markdown, /This is the only run reported: nothing to compare it with\./);
  assert.match(markdown, /One run: no changes to list/);
  assert.not.match(markdown, /\|---\|[^\n]*\n\n/);
});

test("bad input: --last that is not a count, and an unknown baseline file, are one-line errors (exit 2)", () => {
  const last = bench(["report", "--last", "zero", "--runs-dir", runs]);
  assert.is(last.status, 2);
  assert.match(last.stderr, /--last must be a whole number of runs ≥ 1/);
  const missing = bench(["report", "--runs-dir", runs, "--baseline", join(work.path, "nope.json")]);
  assert.is(missing.status, 2);
  assert.match(missing.stderr, /nope\.json: cannot read/);
});

test("inside a directory of runs, a run that cannot be read is listed with its reason and the rest are reported", () => {
  const dir = join(work.path, "with-broken");
  for (const i of [1, 2]) cpSync(join(runs, runId(i)), join(dir, runId(i)), { recursive: true });
  mkdirSync(join(dir, "cut-off"));
  writeFileSync(join(dir, "cut-off", "summary.json"), "{\"schema_version\": 1, \"run_");
  const { runs: selected, unreadable } = selectRuns([dir], runs, undefined);
  assert.equal(selected.map((r) => r.summary.run_id), [runId(1), runId(2)]);
  assert.is(unreadable.length, 1);
  assert.match(unreadable[0].reason, /cut-off\/summary\.json: malformed JSON/);
  const out = join(work.path, "with-broken-report");
  assert.is(bench(["report", dir, "--out", out]).status, 0);
  assert.match(readFileSync(join(out, "report.md"), "utf8"), /Left out \(could not be read\):\n\n- `[^`]*cut-off`: [^\n]*malformed JSON/);
  assert.is(bench(["report", join(dir, "cut-off"), "--out", out]).status, 2, "named explicitly, it stops the report");
});

const haveChromium = existsSync(CHROMIUM_PATH);
(haveChromium ? test : test.skip)("the ten-run report renders in a real browser: every chart drawn, no console errors (screenshot kept)", async () => {
  mkdirSync(outputDir, { recursive: true });
  const screenshot = join(outputDir, "report-history.png");
  const check = await checkReportInBrowser(join(work.path, "report", "report.html"), screenshot);
  assert.equal(check.consoleErrors, []);
  // 12 trend charts (peak memory per arm among them), then the latest run's: speed, gaps, needle grid, throughput, latency percentiles, roofline.
  assert.is(check.chartsRendered, 18);
  assert.is(check.canvases, 18);
  assert.is(check.paintedCanvases, 18);
  assert.is(check.chartsWithData, 18, "no chart is axes alone");
  assert.ok(existsSync(screenshot));
  console.log(`  screenshot: ${screenshot}`);
});

test.run();
