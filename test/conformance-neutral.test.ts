import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CONFORMANCE_CHECKS, type ConformanceTarget } from "../harness/conformance/checks.js";
import { startManagedServer, stopManagedServer, type ManagedServer } from "../harness/sut/http.js";
import { resolveModel } from "../harness/fixtures/registry.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";
import { PACKAGE_ROOT } from "../harness/paths.js";

const work = temporaryDirectory("bench-conformance-");
let server: ManagedServer;

test.before(async () => {
  // Ours with a queue deep enough to hold the whole burst: it queues, as llama.cpp's server does.
  server = await startManagedServer({ modelPath: (await resolveModel("tiny-random:F32")).path, slots: 4, queue: 16, contextSize: 1024, threads: 1, flashAttention: false, bootTimeoutS: 120 });
});
test.after(async () => {
  await stopManagedServer(server);
  work.remove();
});

const target = (extra: Partial<ConformanceTarget> = {}): ConformanceTarget => ({ baseUrl: server.baseUrl, model: "m", expectMetrics: [], ...extra });

test("overload_429: a server that declares no queue bound may queue instead of answering 429 (OpenAI allows it); 200 or a 429 error object, nothing else", async () => {
  const queued = await CONFORMANCE_CHECKS.overload_429(target());
  assert.is(queued.status, "pass", queued.detail);
  assert.match(queued.detail, /^8 at once: all 8 served \(the server queues instead of answering 429/);
});

test("many_stop_strings: eight stop strings (lm-eval sends its until strings plus the EOS text), the matching two last: 200, cut at the earliest", async () => {
  const result = await CONFORMANCE_CHECKS.many_stop_strings(target());
  assert.is(result.status, "pass", result.detail);
  assert.match(result.detail, /^8 stop strings accepted; cut at the earliest match \(text ".*"\)$/);
});

test("metrics_prometheus: series names are the arm's to expect, not ours by default", async () => {
  const anyValid = await CONFORMANCE_CHECKS.metrics_prometheus(target());
  assert.is(anyValid.status, "pass", anyValid.detail);
  const expectsLlamaCpp = await CONFORMANCE_CHECKS.metrics_prometheus(target({ expectMetrics: ["llamacpp:requests_processing"] }));
  assert.equal(expectsLlamaCpp, { status: "fail", detail: "missing llamacpp:requests_processing" });
});

test("disconnect_frees_slot watches whichever in-flight gauge the server exports (ours: bench_slots_active)", async () => {
  const result = await CONFORMANCE_CHECKS.disconnect_frees_slot(target({ slots: 4 }));
  assert.is(result.status, "pass", result.detail);
  assert.match(result.detail, /^slot freed \(bench_slots_active 0, cancelled \+1\)/);
});

test("the report puts conformance side by side, check × server, and lists each difference with the servers' answers", () => {
  const suite = JSON.parse(readFileSync(join(PACKAGE_ROOT, "suites", "serve-conformance.json"), "utf8"));
  delete suite.$schema;
  const path = join(work.path, "two-servers.json");
  writeFileSync(path, JSON.stringify({ ...suite, checks: ["endpoints", "metrics_prometheus"], arms: [
    { label: "ours", model: "tiny-random:F32", sut: "http", server: { slots: 1, queue: 1 }, gate: "required", expect_metrics: ["bench_slots_active"] },
    { label: "expects llama.cpp names", model: "tiny-random:F32", sut: "http", server: { slots: 1, queue: 1 }, gate: "informational", expect_metrics: ["llamacpp:requests_processing"] },
  ] }));
  const runs = join(work.path, "runs");
  assert.is(bench(["run", "--suite", path, "--runs-dir", runs, "--run-id", "side"]).status, 0);
  assert.is(bench(["report", "--runs-dir", runs, "side"]).status, 0);
  const report = readFileSync(join(runs, "side", "report.md"), "utf8");
  assert.match(report, /\| check \| ours \| expects llama\.cpp names \|\n\|---\|---\|---\|\n\| endpoints \| PASS \| PASS \|\n\| metrics_prometheus \| PASS \| FAIL \|/);
  assert.match(report, /- \*\*metrics_prometheus\*\*: ours PASS \(\d+ samples parse as Prometheus text; all 1 series the arm expects present\); expects llama\.cpp names FAIL \(missing llamacpp:requests_processing\)/);
});

test.run();
