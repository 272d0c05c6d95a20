import { resolveModel } from "../../fixtures/registry.js";
import { slidingWindowOf } from "../../gguf/sliding-window.js";
import { readGguf } from "../../gguf/read.js";
import type { AnswersByPrompt } from "../../reuse/prefill-reference.js";
import type { ReuseArm, ReuseSuite } from "../../suites/reuse-suite.js";
import { modelArms } from "../arm-selection.js";
import { armSettings, type SutContext } from "../open-sut.js";
import { assertPrefillReferences, runReuseArm } from "../reuse-runner.js";
import type { SuiteKind } from "./kind.js";

/** A server's state reuse held to its cold answer: a reuse arm is a server arm with B = `concurrency` slots, its ubatch the arm's batch size, its window the model's. */
export const reuseKind: SuiteKind<ReuseSuite, ReuseArm> = {
  // A runner is no HTTP server: --runner leaves a reuse suite nothing to run.
  arms: (suite, options) => (options.runner !== undefined ? [] : modelArms(suite, options)),
  referenceOf: (arm) => arm.prefill_reference,
  async run(suite, arms, battery) {
    const { options } = battery;
    const settingsOf = (arm: ReuseArm) => armSettings({ ...arm, sut: "http" }, options.settings, suite.concurrency);
    const open = (arm: ReuseArm, context: SutContext) => options.openSut({ ...arm, sut: "http" }, settingsOf(arm), context);
    assertPrefillReferences(suite);
    // Each arm's answers, for the arms that name it their prefill reference.
    const answers = new Map<string, AnswersByPrompt>();
    await battery.legs(suite, arms, open, async (arm, sut, _opened, signal) => runReuseArm({
      suiteName: suite.name, suite, arm, sut, emit: battery.emit, signal, reproduce: battery.reproduce(suite, arm),
      units: { ubatch: settingsOf(arm).batchSize, window: slidingWindowOf(readGguf((await resolveModel(arm.model)).path)) },
      answers: answers.set(arm.label, new Map()).get(arm.label)!, referenceAnswers: arm.prefill_reference === undefined ? undefined : answers.get(arm.prefill_reference),
    }));
  },
};
