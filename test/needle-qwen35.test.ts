import { test } from "uvu";
import * as assert from "uvu/assert";
import { join } from "node:path";
import { copyQwen35Margins } from "../harness/fixtures/copy-model-qwen35.js";
import { copyQwen35MoeMargins } from "../harness/fixtures/copy-model-qwen35moe.js";
import { describeRun, runInProcess, needleClasses } from "./helpers/in-process-run.js";
import { temporaryDirectory } from "./helpers/workspace.js";

/**
 * The copy circuits built in qwen35 and qwen35moe (docs/copy-model-qwen35.md): the clean fixtures
 * retrieve at every depth on the embedded SUT, and each planted fault of the family's own
 * mechanism (partial rotary, the delta net's conv, the expert order) loses the needle.
 */

const work = temporaryDirectory("needle-qwen35");
test.after(() => work.remove());
const runs = join(work.path, "runs");


test("the builder's margins: a 36-nat previous-token head at freq_base 0.19 (float64 and llama.cpp's float32 angles), refused at 10000", () => {
  const margins = copyQwen35Margins();
  assert.ok(margins.previousTokenNats > 35.5, `previous-token margin ${margins.previousTokenNats}`);
  assert.ok(margins.previousTokenNatsFloat32 > 35.5, `float32 margin ${margins.previousTokenNatsFloat32}`);
  assert.is(margins.inductionNats, 25);
  assert.is(margins.outputNats, 40);
  assert.equal(copyQwen35MoeMargins(), { routerNats: 8, outputNats: 10 });
  // The usual base leaves most of the 32 pairs nearly still: positions do not separate, and the builder refuses.
  assert.throws(() => copyQwen35Margins(10000), /previous-token margin .* at rope freq_base 10000 is below the 30-nat design/);
});

test("bench run --suite niah-qwen35, embedded arms: copy-4k-qwen35 and copy-4k-qwen35moe retrieve at depths 0.25 / 0.5 / 0.75, exit 0", async () => {
  const result = await runInProcess(runs, "clean", { suites: ["niah-qwen35"], arms: ["copy-4k-qwen35", "copy-4k-qwen35moe"] });
  assert.is(result.code, 0, describeRun(result));
  const printed = result.summaryLines.join("\n");
  assert.match(printed, /^copy-4k-qwen35 needle grid: 3\/3 Y\n {2}L \\ depth 0\.25 0\.50 0\.75 \n {2}4000 {6}Y {4}Y {4}Y/m);
  assert.match(printed, /^copy-4k-qwen35moe needle grid: 3\/3 Y$/m);
  assert.equal(needleClasses(runs, "clean"), ["Y", "Y", "Y", "Y", "Y", "Y"]);
});

// Each fault loses the needle at every depth (measured); one depth each keeps the test short.
for (const fault of ["copy-4k-qwen35-rope-dims", "copy-4k-qwen35-conv-reversed", "copy-4k-qwen35moe-expert-order"]) {
  test(`planted fault ${fault}: the needle is lost (N), exit 1`, async () => {
    const result = await runInProcess(runs, fault, { suites: ["niah-qwen35"], model: fault, niahCases: ["4000:0.5:0"] });
    assert.is(result.code, 1, describeRun(result));
    assert.equal(needleClasses(runs, fault), ["N"]);
  });
}

test.run();
