import { test } from "uvu";
import * as assert from "uvu/assert";
import { buildCopyModel } from "../harness/fixtures/copy-model.js";
import { buildNemotronCopyModel } from "../harness/fixtures/copy-model-nemotron.js";
import { buildGemma4 } from "../harness/fixtures/families/gemma4.js";
import { buildNemotronHMoe } from "../harness/fixtures/families/nemotron-h-moe.js";
import { buildQwen35Tiny } from "../harness/fixtures/families/qwen35.js";
import { buildQwen35MoeTiny } from "../harness/fixtures/families/qwen35moe.js";
import { buildTinyRandom } from "../harness/fixtures/tiny-random.js";
import type { FixtureModel } from "../harness/fixtures/architecture.js";
import { RunDirectory } from "../harness/results/run-directory.js";
import { runBattery } from "../harness/runner/run.js";
import { LlamaCppSut } from "../harness/sut/llamacpp.js";
import { ablateTensor, writeFaultedTinyRandom } from "../scripts/sensitivity/faulted-models.js";
import { temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("ablation");
test.after(() => work.remove());

/** copy-4k is built by hand and has no FFN: its FFN matrices are zero by construction (docs/fixtures.md, "Every parameter matters"). */
const INERT_BY_CONSTRUCTION = /^blk\.\d\.ffn_(gate|up|down)\.weight$/;

test("no fixture tensor is constant: norm weights and every other parameter vary, so a forward that ignores one computes something else", () => {
  const models: FixtureModel[] = [buildTinyRandom(), buildQwen35Tiny("none"), buildQwen35MoeTiny("none"), buildGemma4("none"), buildNemotronHMoe(), buildCopyModel(), buildNemotronCopyModel()];
  for (const model of models) {
    for (const tensor of model.tensors) {
      // A one-value tensor (gemma4's per-layer output scale) cannot vary; it is drawn, not 1.
      if (tensor.values.length === 1 || (model.name === "copy-4k" && INERT_BY_CONSTRUCTION.test(tensor.name))) continue;
      const first = tensor.values[0];
      assert.ok(tensor.values.some((v) => v !== first), `${model.name} ${tensor.name} holds one value (${first}) everywhere`);
    }
  }
});

/**
 * Each tiny-random tensor in turn read as a forward that skips it would (norm weights as 1, other
 * tensors as 0), run on the embedded llama.cpp against the clean goldens on four prompts: some
 * required gate must fail for every one. (Four prompts, not two: with two, dropping layer 1's
 * attention-norm weights still passed greedy parity.) 11 s on two cores at load 3.
 */
const PROMPTS = [0, 1, 2, 3];

test("every tiny-random tensor matters: ablating any one of them fails a required gate against the clean goldens", async () => {
  const passed: string[] = [];
  for (const { name } of buildTinyRandom().tensors) {
    const path = await writeFaultedTinyRandom({ name: `ablate-${name}`, tensors: ablateTensor(name) }, work.path);
    const recorder = new RunDirectory(name, work.path, ["test"]);
    await recorder.open();
    await runBattery({
      suites: ["parity16"], arms: ["F32"], prompts: PROMPTS,
      openSut: (arm, settings) => LlamaCppSut.open(path, settings, arm.label),
    }, recorder, recorder.record);
    // The check that the SUT runs the goldens' artifact would fail on any edited file; what this test asks is whether the numbers show it.
    const failedRequired = recorder.allVerdicts().filter((v) => v.gate === "required" && v.status === "fail" && !/identity/i.test(v.check));
    if (failedRequired.length === 0) passed.push(name);
  }
  assert.equal(passed, [], "tensors whose ablation passed every required gate");
});

test.run();
