import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { describeRun, runInProcess, verdictRow, type InProcessRun } from "./helpers/in-process-run.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("traced-families");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const baseline = join(work.path, "traced-families.json");
// Two prompts: a capture is replayed for the batch's second request too, where a stale buffer shows.
const PROMPTS = [0, 3];
const REGION = 262144;
const ARM = (family: string) => `${family} reference traced`;

interface SuiteArm { readonly label: string; readonly command: readonly string[] }
const suite = JSON.parse(readFileSync(resolve(PACKAGE_ROOT, "suites", "traced-families.json"), "utf8")) as { arms: SuiteArm[] };

/**
 * suites/traced-families.json with a FAULT planted in the named families' arms: same suite name and
 * arm labels (so `bench gate` holds each arm to the clean run's baseline), the arm's own command plus `--fault`.
 */
function faultedSuite(fault: string, families: readonly string[]): string {
  const path = join(work.path, `traced-families-${fault}.json`);
  const { $schema: _schema, ...rest } = suite as { $schema?: string; arms: SuiteArm[] };
  const arms = suite.arms.filter((arm) => families.map(ARM).includes(arm.label)).map((arm) => ({ ...arm, command: [...arm.command, "--fault", fault] }));
  writeFileSync(path, JSON.stringify({ ...rest, arms }));
  return path;
}

const faultyRun = (fault: string, families: readonly string[]) => runInProcess(runs, fault, { suites: [faultedSuite(fault, families)], prompts: PROMPTS });
const summaryOf = (runId: string) => JSON.parse(readFileSync(join(runs, runId, "summary.json"), "utf8"));
const row = (run: InProcessRun, check: string, family: string) => verdictRow(run, check, { arm: ARM(family) });

test("every family's reference runner traced: capture_parity and capture_stable pass, each demand fits the stated region and is ratcheted", async () => {
  const run = await runInProcess(runs, "clean", { suites: ["traced-families"], prompts: PROMPTS });
  assert.is(run.code, 0, describeRun(run));
  const families = ["qwen35", "qwen35moe", "gemma4", "nemotron_h_moe"];
  for (const family of families) {
    assert.match(row(run, "capture_parity", family), /^required pass .*2\/2 identical, 0 near-tie, 0 forward-divergent/);
    assert.match(row(run, "capture_stable", family), /^required pass .*1\/1 captured graphs report the same demand twice/);
    assert.match(row(run, "trace_demand", family), /^required pass /);
  }
  const trace: { arm: string; demand_bytes: number; region_bytes: number; region_semantics: string }[] = summaryOf("clean").trace;
  assert.equal(trace.map((t) => t.arm), families.map(ARM));
  for (const t of trace) {
    assert.equal({ region: t.region_bytes, semantics: t.region_semantics }, { region: REGION, semantics: "fixed-total" });
    assert.ok(t.demand_bytes > 0 && t.demand_bytes < REGION, JSON.stringify(t));
  }
  // The ratchet on each family's figure: a baseline from this run holds it.
  assert.is(bench(["gate", join(runs, "clean"), "--baseline", baseline, "--update"]).status, 0);
  const held = bench(["gate", join(runs, "clean"), "--baseline", baseline]);
  assert.is(held.status, 0, held.stdout + held.stderr);
  for (const t of trace) assert.match(held.stdout, new RegExp(`ok +traced-families/${t.arm}/decode: demand ${t.demand_bytes} B`));
});

test("FAULT trace-routing-on-host (expert ids read back inside the captured step) fails capture_parity on qwen35moe and nemotron_h_moe", async () => {
  const run = await faultyRun("trace-routing-on-host", ["qwen35moe", "nemotron_h_moe"]);
  assert.is(run.code, 1, describeRun(run));
  for (const family of ["qwen35moe", "nemotron_h_moe"]) {
    assert.match(row(run, "capture_parity", family), /^required fail .*prompt \d: traced ids differ from eager at token \d+ \(eager \d+, traced \d+\), FORWARD-DIVERGENT \(max gap \d+ mnats\)/);
    // Eager is untouched: the fault lives in the capture only.
    assert.match(row(run, "greedy_parity", family), /^required pass /);
  }
});

test("FAULT trace-state-aliased (the capture binds the capturing request's recurrent state) fails capture_parity on the batch's second request", async () => {
  const run = await faultyRun("trace-state-aliased", ["qwen35", "nemotron_h_moe"]);
  assert.is(run.code, 1, describeRun(run));
  for (const family of ["qwen35", "nemotron_h_moe"]) {
    // Prompt 3 is the batch's second request: the capture was made during prompt 0's, whose state it still holds.
    assert.match(row(run, "capture_parity", family), /^required fail .*1\/2 identical, 0 near-tie, 1 forward-divergent; prompt 3: traced ids differ from eager/);
  }
});

test("FAULT trace-weights-decoded (a weight decoded per call inside the captured graph) fails trace_demand with both figures, and the ratchet", async () => {
  const run = await faultyRun("trace-weights-decoded", ["gemma4"]);
  assert.is(run.code, 1, describeRun(run));
  const [, demand] = /decode demands (\d+) B, its fixed-total region holds 262144 B/.exec(row(run, "trace_demand", "gemma4")) ?? [];
  assert.ok(Number(demand) > 100 * REGION, row(run, "trace_demand", "gemma4"));
  // The replay still computes the right thing: only the demand shows it.
  assert.match(row(run, "capture_parity", "gemma4"), /^required pass /);
  const gate = bench(["gate", join(runs, "trace-weights-decoded"), "--baseline", baseline]);
  assert.is(gate.status, 1, gate.stdout + gate.stderr);
  assert.match(gate.stdout, new RegExp(`traced-families/${ARM("gemma4")}/decode: trace-region demand rose \\d+ → ${demand} B: stop and report`));
});

test("FAULT trace-buffers-leak (each capture keeps the one before) fails capture_stable on a family with both figures", async () => {
  const run = await faultyRun("trace-buffers-leak", ["qwen35moe"]);
  assert.is(run.code, 1, describeRun(run));
  const [, first, second] = /decode: (\d+) B then (\d+) B/.exec(row(run, "capture_stable", "qwen35moe")) ?? [];
  assert.ok(Number(second) > Number(first), row(run, "capture_stable", "qwen35moe"));
});

test.run();
