import { resolveModel } from "../../fixtures/registry.js";
import { validateLlamaMetadata } from "../../gguf/llama-metadata.js";
import { readGguf } from "../../gguf/read.js";
import { corpusSettings, loadVerifiedCorpusGoldens } from "../../perplexity/corpus-goldens.js";
import type { PerplexityArm, PerplexitySuite } from "../../suites/perplexity-suite.js";
import { modelArms } from "../arm-selection.js";
import { armSettings, type SutContext } from "../open-sut.js";
import { runPerplexityArm } from "../perplexity-runner.js";
import type { SuiteKind } from "./kind.js";

/** Corpus perplexity and KL divergence against the base model's goldens, chunked as llama-perplexity chunks. */
export const perplexityKind: SuiteKind<PerplexitySuite, PerplexityArm> = {
  arms: modelArms,
  async run(suite, arms, battery) {
    const { options, recorder } = battery;
    const goldens = await loadVerifiedCorpusGoldens(suite);
    recorder.provenance.oracles.push({ suite: suite.name, goldens: goldens.directory, model: { ...goldens.manifest.model }, oracle: { ...goldens.manifest.oracle } });
    const baseModel = await resolveModel(suite.base.model);
    const vocabSize = validateLlamaMetadata(readGguf(baseModel.path), baseModel.path).vocabSize;
    // The base's own settings with a context that holds a chunk: an arm differs from the base only by its model and its own settings.
    const { contextSize } = corpusSettings(suite);
    const open = (arm: PerplexityArm, context: SutContext) => options.openSut(arm, armSettings(arm, options.settings, 1, { contextSize }), context);
    await battery.legs(suite, arms, open, async (arm, sut, _opened, signal) => runPerplexityArm({
      suiteName: suite.name, suite, arm, sut, goldens, vocabSize, emit: battery.emit, signal, reproduce: battery.reproduce(suite, arm),
    }));
  },
};
