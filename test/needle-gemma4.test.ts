import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { ensureFixture } from "../harness/fixtures/registry.js";
import { COPY_GEMMA4_DESIGN, copyGemma4Margins, type CopyGemma4Fault } from "../harness/fixtures/copy-model-gemma4.js";
import { describeRun, runInProcess, needleClasses } from "./helpers/in-process-run.js";
import { temporaryDirectory } from "./helpers/workspace.js";

// copy-4k-gemma4 (docs/copy-model-gemma4.md): the needle comes back through gemma4's sliding and
// global layers, and each way of getting the window wrong loses it.

const work = temporaryDirectory("needle-gemma4");
test.after(() => work.remove());
const runs = join(work.path, "runs");


test("copy-4k-gemma4: pinned sha256, the margins the construction relies on, and a design below them refused", async () => {
  const path = await ensureFixture("copy-4k-gemma4", "F32", join(work.path, "models"));
  assert.is(createHash("sha256").update(readFileSync(path)).digest("hex"), "82d08e29864cce11d8b5bd7f97a9fa6b6257f1bfcd8a6113478707bd6b06d013");
  const margins = copyGemma4Margins();
  assert.ok(margins.previousTokenNats > 47.5, `previous-token margin ${margins.previousTokenNats}`);
  assert.ok(margins.windowPlusOneWrongPickNats > 22.5, `window-plus-one wrong pick ${margins.windowPlusOneWrongPickNats}`);
  assert.is(margins.inductionNats, 25);
  assert.ok(Math.abs(margins.cappedOutputNats - 26.102) < 1e-3, `capped output ${margins.cappedOutputNats}`);
  // A head peaked at Δ = 1 would still pass the clean window but not catch a window one too wide.
  assert.throws(() => copyGemma4Margins({ ...COPY_GEMMA4_DESIGN, peakDistance: 1 }), /window-plus-one wrong pick -?\d+\.\d+ nats is below 10/);
  // A raw output logit of 20 comes out of the soft cap at 17.4 nats.
  assert.throws(() => copyGemma4Margins({ ...COPY_GEMMA4_DESIGN, outputLogit: 20 }), /capped output margin 17\.\d+ nats is below 20/);
  assert.throws(() => copyGemma4Margins({ ...COPY_GEMMA4_DESIGN, previousTokenPeak: 30 }), /previous-token margin 28\.\d+ nats is below 40/);
});

test("bench run --suite niah-gemma4, embedded: the needle comes back verbatim at depths 0.25 / 0.5 / 0.75, exit 0", async () => {
  const result = await runInProcess(runs, "clean", { suites: ["niah-gemma4"], arms: ["copy-4k-gemma4"] });
  assert.is(result.code, 0, describeRun(result));
  assert.match(result.summaryLines.join("\n"), /^copy-4k-gemma4 needle grid: 3\/3 Y\n {2}L \\ depth 0\.25 0\.50 0\.75 \n {2}4000 {6}Y {4}Y {4}Y/m);
});

for (const fault of ["window-plus-one", "window-full", "global-as-sliding"] satisfies CopyGemma4Fault[]) {
  test(`planted fault ${fault}: the needle is lost (N at depth 0.5), exit 1`, async () => {
    const result = await runInProcess(runs, fault, { suites: ["niah-gemma4"], arms: ["copy-4k-gemma4"], model: `copy-4k-gemma4-${fault}`, niahCases: ["4000:0.5:0"] });
    assert.is(result.code, 1, describeRun(result));
    assert.equal(needleClasses(runs, fault), ["N"]);
  });
}

test("the float64 reference forward finds the needle too (niah-reference, depth 0.5), and loses it with its window one too wide (swa-off-by-one), exit 1", async () => {
  const reference = ["python3", "{bench}/harness/oracle/float64/reference_forward.py", "{model}"];
  const clean = await runInProcess(runs, "reference", { suites: ["niah-reference"], model: "copy-4k-gemma4", runner: reference, niahCases: ["4000:0.5:0"] });
  assert.is(clean.code, 0, describeRun(clean));
  assert.equal(needleClasses(runs, "reference"), ["Y"]);
  const faulted = await runInProcess(runs, "reference-swa", { suites: ["niah-reference"], model: "copy-4k-gemma4", runner: [...reference, "--fault", "swa-off-by-one"], niahCases: ["4000:0.5:0"] });
  assert.is(faulted.code, 1, describeRun(faulted));
  assert.equal(needleClasses(runs, "reference-swa"), ["N"]);
});

test.run();
