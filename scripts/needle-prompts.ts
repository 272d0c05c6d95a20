import type { Token } from "node-llama-cpp";
import { resolveModel } from "../harness/fixtures/registry.js";
import { buildHaystack } from "../harness/niah/haystack.js";
import { needleFromSeed, needleSeed } from "../harness/niah/needle.js";
import { needleCases } from "../harness/runner/niah-runner.js";
import type { ResolvedNiahSuite } from "../harness/suites/niah-suite.js";
import { LlamaCppSut, type LlamaCppSettings } from "../harness/sut/llamacpp.js";

/**
 * The needle suite's prompts exactly as the harness builds them for an arm (the embedded tokenizer
 * is the servers' too), made once outside any timing: the baselines of the needle benchmarks.
 */
export async function needlePrompts(spec: ResolvedNiahSuite, modelId: string, settings: LlamaCppSettings): Promise<Token[][]> {
  const model = await resolveModel(modelId);
  const builder = await LlamaCppSut.open(model.path, settings);
  try {
    const prompts: Token[][] = [];
    for (const { length, depth, trial } of needleCases(spec)) {
      const needle = needleFromSeed(needleSeed(trial, depth, length), spec.needleAlphabet, spec.needleLength);
      prompts.push((await buildHaystack(builder, spec, needle, length, depth)).promptIds as Token[]);
    }
    return prompts;
  } finally {
    await builder.close();
  }
}
