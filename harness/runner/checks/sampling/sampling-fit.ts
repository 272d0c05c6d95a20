import { describeSetting, expectedDistribution, narrowestTopK, type SamplingSetting } from "../../../sampling/convention.js";
import { drawFirstTokens } from "../../../sampling/sampling-wire.js";
import { goodnessOfFit, type FitResult } from "../../../stats/goodness-of-fit.js";
import type { SamplingArm, SamplingGridSetting, SamplingSuite } from "../../../suites/sampling-suite.js";
import { makeCell } from "../../check.js";
import type { SamplingCheck, TokenizedPrompt } from "./sampling-arm-state.js";

/** The largest k "narrowest" may pick: past it the tokens at the cut carry too little mass to be drawn often enough. */
const NARROWEST_MAX_K = 20;

/** The setting a grid entry asks at a prompt ("narrowest" resolved on the oracle's distribution there). */
export function resolveSetting(entry: SamplingGridSetting, logprobs: Float64Array): SamplingSetting {
  return { ...entry, top_k: entry.top_k === "narrowest" ? narrowestTopK(logprobs, NARROWEST_MAX_K) : entry.top_k };
}

/** The (prompt, setting index) pairs an arm draws: each prompt's settings that the arm draws too. */
export function drawnCases(suite: SamplingSuite, samplingArm: SamplingArm, prompts: readonly TokenizedPrompt[]): { prompt: TokenizedPrompt; setting: number; draws: number }[] {
  const all = suite.settings.map((_, i) => i);
  return prompts.flatMap((prompt) => {
    const atPrompt = suite.prompts[prompt.index].settings ?? all;
    return atPrompt.filter((i) => samplingArm.settings?.includes(i) ?? true).map((setting) => ({ prompt, setting, draws: suite.prompts[prompt.index].draws }));
  });
}

function fitLine(fit: FitResult): string {
  const statistic = fit.statistic === "g" ? "G" : "X²";
  if (fit.outsideSupport > 0) return `${fit.outsideSupport} of ${fit.draws} draws outside the convention's support (${statistic} = ∞, p = 0)`;
  return `${statistic} = ${fit.value.toFixed(2)} on ${fit.degreesOfFreedom} df (${fit.cells} cells, ${fit.pooled} pooled), p = ${fit.pValue.toExponential(2)}`;
}

/**
 * Many first tokens drawn at each (prompt, setting), held to the oracle's distribution there as
 * the arm's declared convention transforms it, by a G-test at the suite's level: one cell per
 * (prompt, setting), naming the setting, the statistic and its p-value. A setting whose cuts the
 * oracle's numbers leave unsettled is SKIPPED for that prompt (a SUT could honestly keep or drop
 * the token at the cut); a grid whose every case is unsettled is a SKIPPED check. A setting that
 * leaves one possible token (a small temperature) is tested all the same: every draw must be that
 * token, and one elsewhere lies outside the support (p = 0).
 */
export const samplingFitCheck: SamplingCheck<"sampling_fit"> = {
  kind: "sampling",
  name: "sampling_fit",
  needs: ["tokenize"],
  level: ({ context }) => context.suite.checks.sampling_fit,
  async run(state, gate) {
    const { context } = state;
    const { suite, samplingArm: arm } = context;
    const cases = drawnCases(suite, arm, context.prompts);
    let tested = 0;
    let failed = 0;
    let worst: { p: number; line: string } | undefined;
    let firstFail: string | undefined;
    for (const c of cases) {
      if (context.signal.aborted) break;
      const logprobs = await context.oracle(c.prompt.ids);
      const setting = resolveSetting(suite.settings[c.setting], logprobs);
      const where = `prompt ${c.prompt.label} (${c.prompt.ids.length} tokens), ${describeSetting(setting)}`;
      const fields = { prompt: c.prompt.index, prompt_class: `setting ${c.setting}` };
      const selector = ` --prompt ${c.prompt.index}`;
      const expected = expectedDistribution(logprobs, setting, arm.convention);
      if (expected.unsettled !== undefined) {
        await context.emit({ kind: "cells", cells: [makeCell(context, "sampling_fit", gate, { ...fields, status: "skip", detail: `${where}: not tested: ${expected.unsettled}` }, selector)] });
        continue;
      }
      const counts = await drawFirstTokens(context.server, {
        prompt: c.prompt.ids, setting, count: c.draws, vocabSize: context.vocabSize, stream: arm.stream, batch: suite.batch, concurrency: suite.concurrency,
      });
      const fit = goodnessOfFit(counts, expected.probabilities, "g");
      tested++;
      const pass = fit.pValue >= suite.level;
      const line = `${where}, ${arm.convention} convention, ${c.draws} draws over ${expected.support} possible tokens: ${fitLine(fit)}`;
      if (!pass) {
        failed++;
        firstFail ??= line;
      }
      if (worst === undefined || fit.pValue < worst.p) worst = { p: fit.pValue, line };
      await context.emit({ kind: "cells", cells: [makeCell(context, "sampling_fit", gate, { ...fields, status: pass ? "pass" : "fail", detail: `${line}; level ${suite.level}` }, selector)] });
    }
    if (tested === 0) return { status: "skip", reason: `no (prompt, setting) of ${cases.length} could fail: every one was unsettled at a cut` };
    state.summaryLine = `${arm.label} sampling fit (${arm.convention} convention): ${tested - failed}/${tested} settings fit at level ${suite.level}; lowest p ${worst!.p.toExponential(2)}`;
    return {
      status: failed === 0 ? "pass" : "fail",
      summary: failed === 0 ? `${tested}/${tested} settings fit at level ${suite.level}; lowest: ${worst!.line}` : `FAIL: ${failed} of ${tested} settings do not fit at level ${suite.level}; first: ${firstFail}`,
      metrics: { settings_tested: tested, settings_failed: failed, skipped: cases.length - tested, lowest_p: worst!.p, level: suite.level },
    };
  },
};
