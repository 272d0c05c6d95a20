import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { holdToBounds } from "../harness/accuracy/distribution-bounds.js";
import { teacherForcedAccuracy } from "../harness/accuracy/teacher-forced.js";
import { describeRun, runInProcess, verdictRow } from "./helpers/in-process-run.js";
import { temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("distribution-gate");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const REFERENCE = "python3 {bench}/harness/oracle/float64/reference_forward.py {model}";
/** `bench run --suite parity16 --runner RUNNER --prompt 4 --prompt 5`, in this process (helpers/in-process-run.ts). */
const runWith = (runner: string, runId: string) => runInProcess(runs, runId, { suites: ["parity16"], runner: runner.split(" "), prompts: [4, 5] });

interface Verdict { arm: string; check: string; gate: string; status: string; summary?: string; reason?: string; metrics?: Record<string, number | null> }
const verdictsOf = (runId: string): Verdict[] => JSON.parse(readFileSync(join(runs, runId, "summary.json"), "utf8")).verdicts;

test("the float64 reference forward in the F32 arm's place passes the distribution gate: exit 0", async () => {
  const result = await runWith(REFERENCE, "clean");
  assert.is(result.code, 0, describeRun(result));
  const distribution = verdictsOf("clean").find((v) => v.check === "distribution")!;
  assert.is(distribution.gate, "required");
  assert.is(distribution.status, "pass");
  assert.ok(distribution.metrics!.max_kld_mean_measured! < 1e-6, distribution.summary);
});

// Output-head scaling keeps every greedy id (top-1 100%): before the distribution gate these faults exited 0.
// Skipping the final RMSNorm did too while fixture norm weights were all 1; with random norm weights
// it may move an id as well, so only the distribution gate's verdict is asserted for it.
for (const fault of ["final-norm-skipped", "output-head-x0.5", "output-head-x1.01"]) {
  test(`FAULT ${fault}: the required distribution gate fails, exit 1${fault === "final-norm-skipped" ? "" : "; greedy parity passes"}`, async () => {
    const result = await runWith(`${REFERENCE} --fault ${fault}`, fault);
    assert.is(result.code, 1, describeRun(result));
    const verdicts = verdictsOf(fault);
    if (fault !== "final-norm-skipped") assert.is(verdicts.find((v) => v.check === "greedy_parity")!.status, "pass", "the fault keeps the argmax: greedy ids cannot see it");
    const distribution = verdicts.find((v) => v.check === "distribution")!;
    assert.is(distribution.status, "fail");
    assert.is(distribution.gate, "required");
    assert.match(distribution.summary!, /FAIL kld mean [\d.]+e-\d+ > 1e-6/);
    assert.match(verdictRow(result, "distribution"), /^required fail /);
  });
}

test("a bound the data cannot measure fails it (no position scored), and each bound is held the right way", () => {
  const row = (logprobs: number[]) => ({ ids: logprobs.map((_, i) => i), logprobs });
  const none = teacherForcedAccuracy([], [], []);
  assert.equal(holdToBounds(none, { max_kld_mean: 1 }).map((r) => [r.value, r.ok]), [[null, false]]);
  const oracle = [[row([Math.log(0.9), Math.log(0.1)])]];
  const halved = teacherForcedAccuracy([[0]], oracle, [[row([Math.log(0.6), Math.log(0.4)])]]);
  const results = holdToBounds(halved, { max_kld_mean: 1e-3, max_rms_delta_p: 0.5, min_top1: 1, min_same_top: 1 });
  assert.equal(results.map((r) => [r.bound, r.ok]), [["max_kld_mean", false], ["max_rms_delta_p", true], ["min_same_top", true], ["min_top1", true]]);
});

test.run();
