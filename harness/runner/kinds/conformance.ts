import type { ConformanceArm, ConformanceSuite } from "../../suites/conformance-suite.js";
import { TEXT_CHECKS } from "../../conformance/groups/text.js";
import { openTextReference } from "../../conformance/text-reference.js";
import { resolveModel } from "../../fixtures/registry.js";
import { caseTimeoutOf } from "../../sut/with-timeout.js";
import { modelArms } from "../arm-selection.js";
import { runConformanceArm } from "../conformance-runner.js";
import { apiKeyOf } from "../open-sut.js";
import { openServerArm } from "../open-server-arm.js";
import type { SuiteKind } from "./kind.js";

/** An OpenAI-compatible server held to the API's contract: each arm a running URL, a command that starts one, or ours on a model. */
export const conformanceKind: SuiteKind<ConformanceSuite, ConformanceArm> = {
  // A runner is no HTTP server: --runner leaves a conformance suite nothing to run.
  arms: (suite, options) => (options.runner !== undefined ? [] : modelArms(suite, options)),
  // Each arm has its own server; a slower one answers a burst with more 429s, never fewer.
  sharesMachine: () => true,
  async run(suite, arms, battery) {
    const { emit } = battery;
    // The text checks' reference is the arm's own file, loaded once per arm and only where the suite asks a text check.
    const asksText = suite.checks.some((name) => name in TEXT_CHECKS);
    await battery.legs(suite, arms, (arm, context) => openServerArm(suite, arm, context, emit), async (arm, sut, server, signal) => {
      const text = asksText && arm.model !== undefined ? await openTextReference((await resolveModel(arm.model)).path) : undefined;
      try {
        return await runConformanceArm({
          suiteName: suite.name, arm, sut, emit, signal,
          reproduce: battery.reproduce(suite, arm), checks: suite.checks, caseTimeout: caseTimeoutOf(suite, battery.options.caseTimeoutS),
          target: {
            baseUrl: server.baseUrl, model: arm.model_id ?? String(server.provenance.settings.model), apiKey: apiKeyOf(arm), managed: server.managed,
            ...(text === undefined ? {} : { textReference: text.reference }),
            ...(arm.server === undefined ? {} : { slots: arm.server.slots ?? 2, queue: arm.server.queue ?? 1 }), expectMetrics: arm.expect_metrics ?? [],
            ...(arm.logprob_tolerance === undefined ? {} : { logprobTolerance: arm.logprob_tolerance }),
          },
        });
      } finally {
        await text?.close();
      }
    });
  },
};
