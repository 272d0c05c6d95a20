import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describeRun, errorLine, runInProcess, verdictRow } from "./helpers/in-process-run.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("traced-decode");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const REFERENCE = "python3 {bench}/harness/oracle/float64/reference_forward.py {model}";
/** suites/traced-reference.json on two prompts, its arm (or a runner in its place) eager and traced: `bench run` in this process (helpers/in-process-run.ts). */
const tracedRun = (runId: string, runner?: string) =>
  runInProcess(runs, runId, { suites: ["traced-reference"], prompts: [0, 3], runner: runner?.split(" ") });
const summaryOf = (runId: string) => JSON.parse(readFileSync(join(runs, runId, "summary.json"), "utf8"));
const verdict = (runId: string, check: string) => summaryOf(runId).verdicts.find((v: { check: string }) => v.check === check);

test("the reference runner, eager and traced: capture_parity and capture_stable pass, its demand is reported and ratcheted", async () => {
  // As a --runner, so its arm is labelled as the faulty runs' below are (the ratchet keys on suite/arm/capture).
  const run = await tracedRun("traced", REFERENCE);
  assert.is(run.code, 0, describeRun(run));
  assert.match(verdictRow(run, "capture_parity"), /^required pass .*2\/2 identical, 0 near-tie, 0 forward-divergent/);
  assert.match(verdictRow(run, "capture_stable"), /^required pass .*1\/1 captured graphs report the same demand twice/);
  const summary = summaryOf("traced");
  assert.match(summary.suts[0].provenance.settings.modes, /^eager,traced$/);
  // The demand is the bytes the replay buffers hold: the same figure capture_stable compared.
  const [trace] = summary.trace;
  assert.equal({ capture: trace.capture, region_semantics: trace.region_semantics }, { capture: "decode", region_semantics: "dynamic" });
  assert.ok(trace.demand_bytes > 0);
  assert.is(verdict("traced", "capture_stable").metrics.demand_bytes_max, trace.demand_bytes);

  // The trace ratchet on real figures: a baseline from this run holds; a run whose captures leak fails it.
  const baseline = join(work.path, "traced.json");
  assert.is(bench(["gate", join(runs, "traced"), "--baseline", baseline, "--update"]).status, 0);
  const held = bench(["gate", join(runs, "traced"), "--baseline", baseline]);
  assert.is(held.status, 0, held.stdout + held.stderr);
  assert.match(held.stdout, new RegExp(`ok +traced-reference/runner/decode: demand ${trace.demand_bytes} B`));
});

test("a FAKE traced mode whose replay diverges (position baked into the capture) fails capture_parity, classified against the oracle", async () => {
  const run = await tracedRun("frozen", `${REFERENCE} --fault trace-position-frozen`);
  assert.is(run.code, 1, describeRun(run));
  const parity = verdict("frozen", "capture_parity");
  assert.is(parity.status, "fail");
  assert.match(parity.summary, /prompt 0: traced ids differ from eager at token \d+ \(eager \d+, traced \d+\), FORWARD-DIVERGENT \(max gap \d+ mnats\)/);
  assert.match(parity.summary, /an input baked into the capture as a constant/);
  // The eager path is untouched: greedy parity still passes, and so does the demand (the capture itself is the same size).
  assert.is(verdict("frozen", "greedy_parity").status, "pass");
  assert.is(verdict("frozen", "capture_stable").status, "pass");
});

test("unstable demand (each capture keeps the buffers of the one before) fails capture_stable with both figures", async () => {
  const run = await tracedRun("leak", `${REFERENCE} --fault trace-buffers-leak`);
  assert.is(run.code, 1, describeRun(run));
  const stable = verdict("leak", "capture_stable");
  assert.is(stable.status, "fail");
  const [, first, second] = /decode: (\d+) B then (\d+) B/.exec(stable.summary) ?? [];
  assert.ok(Number(second) > Number(first), stable.summary);
  assert.is(verdict("leak", "capture_parity").status, "pass");
  // Held to the clean run's baseline, the grown demand also fails the trace ratchet.
  const gate = bench(["gate", join(runs, "leak"), "--baseline", join(work.path, "traced.json")]);
  assert.is(gate.status, 1);
  assert.match(gate.stdout, /trace-region demand rose \d+ → \d+ B: stop and report/);
});

test("a runner that declares no traced mode: capture checks are SKIPPED — NOT A PASS (77), never passed", async () => {
  const run = await tracedRun("eager-only", "python3 {bench}/test/helpers/fake_runner.py partial {model}");
  assert.is(run.code, 77, describeRun(run));
  assert.match(verdict("eager-only", "capture_parity").reason, /lacks tracedGreedy/);
});

test("a hello declaring a mode the protocol does not know is refused: exit 2, one line naming hello.modes", async () => {
  const run = await tracedRun("unknown-mode", "python3 {bench}/test/helpers/fake_runner.py unknown-mode {model}");
  assert.is(run.code, 2, describeRun(run));
  assert.match(errorLine(run), /hello\.modes: the runner's hello declares modes \["eager","graph"\] \(fix: list some of "eager", "traced", or leave modes out \(eager only\)\)/);
});

test.run();
