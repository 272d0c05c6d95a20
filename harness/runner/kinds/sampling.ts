import { BenchError } from "../../errors.js";
import { resolveModel } from "../../fixtures/registry.js";
import { sha256File } from "../../io/sha256.js";
import { FullDistributions } from "../../sampling/full-distributions.js";
import type { SamplingArm, SamplingSuite } from "../../suites/sampling-suite.js";
import { stopManagedServer } from "../../sut/managed-server.js";
import { openHttpSut } from "../../sut/http.js";
import { startServerCommand } from "../../sut/server-command.js";
import { caseTimeoutOf } from "../../sut/with-timeout.js";
import { armsByLabel, selectIndices } from "../arm-selection.js";
import type { TokenizedPrompt } from "../checks/sampling/sampling-arm-state.js";
import { modelTheArmNames } from "../identity.js";
import { runSamplingArm } from "../sampling-runner.js";
import { fillPlaceholders, type SutContext } from "../open-sut.js";
import type { SuiteKind } from "./kind.js";

/** Indices that name no setting are the suite's bad input, not a run that draws less than it says. */
function assertSettingIndices(suite: SamplingSuite): void {
  const check = (indices: readonly number[] | undefined, field: string) => {
    const bad = indices?.find((i) => i >= suite.settings.length);
    if (bad !== undefined) throw new BenchError(`setting index ${bad} names no setting (there are ${suite.settings.length})`, { file: suite.path, field, fix: `use indices from 0 to ${suite.settings.length - 1}` });
  };
  suite.prompts.forEach((prompt, i) => check(prompt.settings, `prompts.${i}.settings`));
  suite.arms.forEach((arm, i) => check(arm.settings, `arms.${i}.settings`));
}

/**
 * What a server draws at temperature > 0: each arm's server started from its command, its draws
 * held to the embedded llama.cpp's full distribution at each prompt under the arm's declared
 * convention (sampling_fit), its seeds (seeds) and its parameters (parameters).
 */
export const samplingKind: SuiteKind<SamplingSuite, SamplingArm> = {
  arms(suite, options) {
    assertSettingIndices(suite);
    // A runner is no server that samples: --runner leaves this suite nothing to run.
    return options.runner !== undefined ? [] : armsByLabel(suite, options);
  },
  async run(suite, arms, battery) {
    const { emit, options } = battery;
    const timeout = caseTimeoutOf(suite, options.caseTimeoutS);
    // --prompt narrows the prompts (a cell's reproduce line names its own).
    const promptIndices = selectIndices(suite.prompts.length, options.prompts, "prompt index", "--prompt", suite.path);
    const distributions = new FullDistributions();
    const open = async (arm: SamplingArm, context: SutContext) => {
      const model = await resolveModel(arm.model);
      const argv = arm.command.map((part) => fillPlaceholders(part, model.path));
      const server = await startServerCommand(argv, { label: arm.label, bootTimeoutS: context.bootTimeoutS, onProgress: context.onLog, onProcess: context.onProcess, signal: context.signal, shutdownGraceS: context.shutdownGraceS });
      try {
        return await openHttpSut(server.baseUrl, { label: arm.label, managed: server, command: server.argv, modelPath: model.path, modelSha256: await sha256File(model.path), ...context });
      } catch (error) {
        await stopManagedServer(server, context.shutdownGraceS, context.onWarning);
        throw error;
      }
    };
    try {
      await battery.legs(suite, arms, open, async (arm, sut, opened, signal) => {
        const texts = promptIndices.map((p) => suite.prompts[p].text.repeat(suite.prompts[p].repeat ?? 1));
        // A server that cannot tokenize leaves no prompt to draw at: every check is SKIPPED on its missing capability.
        const ids = sut.tokenize === undefined ? [] : await sut.tokenize(texts);
        const prompts: TokenizedPrompt[] = ids.map((promptIds, i) => ({ index: promptIndices[i], label: suite.prompts[promptIndices[i]].label, ids: promptIds }));
        const vocabSize = prompts.length === 0 ? 0 : (await distributions.at(arm.model, prompts[0].ids)).vocabSize;
        return runSamplingArm({
          suiteName: suite.name, arm, sut, emit, signal, reproduce: battery.reproduce(suite, arm), expectedModel: await modelTheArmNames(arm),
          suite, samplingArm: arm, server: { baseUrl: opened.baseUrl, wire: arm.wire, signal, timeout }, prompts, vocabSize,
          oracle: async (promptIds) => (await distributions.at(arm.model, promptIds)).logprobs,
        });
      });
    } finally {
      await distributions.close();
    }
  },
};
