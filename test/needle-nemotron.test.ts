import { test } from "uvu";
import * as assert from "uvu/assert";
import { join } from "node:path";
import { buildNemotronCopyModel, NEMOTRON_COPY_DESIGN, nemotronCopyMargins } from "../harness/fixtures/copy-model-nemotron.js";
import { resolveModel } from "../harness/fixtures/registry.js";
import { buildHaystack } from "../harness/niah/haystack.js";
import { loadSuite } from "../harness/suites/load.js";
import { resolveNiahSuite, type NiahSuite } from "../harness/suites/niah-suite.js";
import { LlamaCppSut, ORACLE_SETTINGS } from "../harness/sut/llamacpp.js";
import { describeRun, runInProcess, needleClasses } from "./helpers/in-process-run.js";
import { temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("needle-nemotron");
test.after(() => work.remove());
const runs = join(work.path, "runs");


test("copy-4k-nemotron: the margins the construction relies on, and the builder refuses a design below them", () => {
  const margins = nemotronCopyMargins();
  assert.ok(margins.convLeak < 5e-5, `conv leak ${margins.convLeak}`);
  assert.is(margins.inductionNats, 25);
  assert.ok(margins.routedWeight > 0.9999, `routed weight ${margins.routedWeight}`);
  assert.ok(margins.outputNats > 39.99, `output margin ${margins.outputNats}`);
  // SiLU near 0: a conv that does not push cold channels far below zero leaks the wrong classes.
  assert.throws(() => buildNemotronCopyModel("none", { ...NEMOTRON_COPY_DESIGN, convOffset: 2 }), /conv leak .* is above the 0\.001 design/);
  assert.throws(() => nemotronCopyMargins({ ...NEMOTRON_COPY_DESIGN, routerLogit: 3 }), /routed weight .* is below the 0\.999 design/);
  const model = buildNemotronCopyModel();
  assert.is(model.architecture, "nemotron_h_moe");
  assert.equal(model.tensors.filter((t) => t.name.endsWith(".ssm_conv1d.weight")).map((t) => t.dims), [[4, 448], [4, 448]]);
});

test("copy-4k-nemotron through llama.cpp: each needle character wins by the designed ~40 nats (teacher-forced, depth 0.5)", async () => {
  const spec = resolveNiahSuite(loadSuite("niah-nemotron") as NiahSuite);
  const sut = await LlamaCppSut.open((await resolveModel("copy-4k-nemotron")).path, { ...ORACLE_SETTINGS, contextSize: 4096 });
  try {
    const haystack = await buildHaystack(sut, spec, "BCDF2345", 4000, 0.5);
    // One token per character; tokenize() adds BOS and the dummy-prefix "▁" before them.
    const needle = (await sut.tokenize(["BCDF2345"]))[0].slice(-8);
    const [steps] = await sut.teacherForcedTopK([{ promptIds: haystack.promptIds, continuationIds: needle, k: 2 }]);
    steps.forEach((step, i) => {
      assert.is(step.ids[0], needle[i], `character ${i} is the greedy choice`);
      const gap = step.logprobs[0] - step.logprobs[1];
      assert.ok(gap > 39 && gap < 41, `character ${i}: margin ${gap.toFixed(2)} nats`);
    });
  } finally {
    await sut.close();
  }
});

test("bench run --suite niah-nemotron: the clean fixture retrieves at depths 0.25 / 0.5 / 0.75 on the embedded SUT, exit 0", async () => {
  // The server arms run in the suite itself (bench run --suite suites/niah-nemotron.json): the transport is niah.test.ts's concern.
  const result = await runInProcess(runs, "clean", { suites: ["niah-nemotron"], arms: ["copy-4k-nemotron"] });
  assert.is(result.code, 0, describeRun(result));
  assert.match(result.summaryLines.join("\n"), /^copy-4k-nemotron needle grid: 3\/3 Y$/m);
  assert.equal(needleClasses(runs, "clean"), ["Y", "Y", "Y"]);
});

for (const fault of ["conv-reversed", "experts-permuted"]) {
  test(`planted fault copy-4k-nemotron-${fault}: the needle is lost (N), exit 1`, async () => {
    const result = await runInProcess(runs, fault, { suites: ["niah-nemotron"], model: `copy-4k-nemotron-${fault}`, niahCases: ["4000:0.5:0"] });
    assert.is(result.code, 1, describeRun(result));
    assert.equal(needleClasses(runs, fault), ["N"]);
  });
}

test.run();
