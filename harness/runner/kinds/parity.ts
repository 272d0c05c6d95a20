import { validateLlamaMetadata } from "../../gguf/llama-metadata.js";
import { readGguf } from "../../gguf/read.js";
import { loadVerifiedGoldens } from "../../goldens/verified.js";
import { OnDemandOracle } from "../../oracle/llamacpp-oracle.js";
import { TeacherForcedCache } from "../../oracle/teacher-forced-cache.js";
import { armOracle, type ParitySuite, type SuiteArm } from "../../suites/parity-suite.js";
import { modelArms, selectIndices } from "../arm-selection.js";
import { armSettings, type SutContext } from "../open-sut.js";
import { runParityArm } from "../parity-runner.js";
import type { SuiteKind } from "./kind.js";

/** Greedy-id parity against the goldens, with the checks of runParityArm; arms grouped by the oracle they answer to. */
export const parityKind: SuiteKind<ParitySuite, SuiteArm> = {
  arms: modelArms,
  // Before any work: suites differ in prompt count (the default battery's zoo-quick has 4), so a --prompt
  // one of the run's parity suites lacks is refused naming that suite, not found after others ran.
  checkSelection(suites, options) {
    for (const suite of suites) if (modelArms(suite, options).length > 0) selectedPrompts(suite, options.prompts);
  },
  // Its verdicts are ids and log-probs; the tokens per second it records are then measured beside another suite (docs/cli.md#suites-side-by-side).
  sharesMachine: () => true,
  async run(suite, arms, battery) {
    const { options, recorder } = battery;
    const prompts = selectedPrompts(suite, options.prompts);
    // Arms are grouped by the oracle they answer to (one per model family in a zoo suite), in suite order.
    for (const oracleReference of [...new Set(arms.map((arm) => armOracle(suite, arm)))]) {
      const group = arms.filter((arm) => armOracle(suite, arm) === oracleReference);
      const { goldens, oracleModel } = await loadVerifiedGoldens(suite, oracleReference);
      // A context sized to the prompts: one KV cell per token in flight is all greedy decoding needs,
      // and a 16-sequence context of 1,024 cells each costs more to set up than the checks themselves.
      const longest = Math.max(...prompts.map((p) => goldens.promptIds[p].length)) + goldens.manifest.T;
      const oracle = await OnDemandOracle.open(oracleModel, longest);
      recorder.provenance.oracles.push({ suite: suite.name, goldens: goldens.directory, model: { ...goldens.manifest.model }, oracle: { ...goldens.manifest.oracle } });
      try {
        const cache = new TeacherForcedCache(oracle);
        const vocabSize = validateLlamaMetadata(readGguf(oracleModel.path), oracleModel.path).vocabSize;
        const fitted = { contextSize: Math.ceil((longest + 1) / 64) * 64 };
        const open = (arm: SuiteArm, context: SutContext) => options.openSut(arm, armSettings(arm, options.settings, prompts.length, fitted), context);
        await battery.legs(suite, group, open, (arm, sut, _opened, signal) => runParityArm({
          suiteName: suite.name, suite, arm, sut, goldens, oracle: cache, prompts, vocabSize, emit: battery.emit, signal, reproduce: battery.reproduce(suite, arm),
        }));
      } finally {
        await oracle.close();
      }
    }
  },
};

/** The prompt indices --prompt selects from a parity suite (all when none), each checked against its prompt count. */
function selectedPrompts(suite: ParitySuite, requested: readonly number[] | undefined): number[] {
  return selectIndices(suite.prompts.length, requested, "prompt index", "--prompt", suite.path);
}
