import { performance } from "node:perf_hooks";
import { resolveModel } from "../../../fixtures/registry.js";
import { paritySummaryLine, tallyParity } from "../../../parity/classify.js";
import { modelConfigDifferences } from "../../../parity/model-config-diff.js";
import { askGreedy } from "../../../sut/answer-shape.js";
import { IDS_ONLY_SCOPE, idsOnly, sortAnswers, type ParityCheck } from "./parity-arm-state.js";

/**
 * Greedy ids alone, classified against the goldens (STRICT, NEAR-TIE within the band, or
 * FORWARD-DIVERGENT): the arm's parity line. Its answers are kept for the checks that compare
 * other paths against them.
 */
export const greedyParityCheck: ParityCheck<"greedy_parity"> = {
  kind: "parity",
  name: "greedy_parity",
  needs: ["greedy"],
  level: ({ context }) => context.suite.checks.greedy_parity,
  async run(state, gate) {
    const { suite, arm, sut, goldens, prompts, vocabSize } = state.context;
    const started = performance.now();
    const answers = await askGreedy(sut, "greedy", state.greedyRequests(), vocabSize);
    const greedyMs = performance.now() - started;
    const { valid, broken } = sortAnswers(prompts, answers);
    const generated = [...valid.values()].reduce((sum, row) => sum + row.length, 0);
    state.aloneIds = valid;
    const results = await state.classifyPaths(valid);
    await state.record([...state.parityCells("greedy_parity", gate, results), ...state.brokenCells("greedy_parity", gate, "greedy", broken)]);
    const tally = tallyParity(results, broken.length);
    const summaryLine = paritySummaryLine(arm.label, tally, arm.gate === "informational") + (idsOnly(goldens) ? `; ${IDS_ONLY_SCOPE}` : "");
    state.summaryLine = summaryLine;
    const configDifferences = tally.forwardDivergent > 0 && sut.provenance.modelPath !== undefined
      ? modelConfigDifferences(sut.provenance.modelPath, (await resolveModel(goldens.manifest.model.id)).path)
      : [];
    return {
      status: tally.forwardDivergent === 0 && tally.rejected === 0 ? "pass" : "fail",
      summary: summaryLine + (configDifferences.length === 0 ? "" : `; the SUT's model file differs from the oracle's in ${configDifferences.join(", ")}`),
      metrics: {
        prompts: tally.prompts, strict: tally.strict, near_tie: tally.nearTie, forward_divergent: tally.forwardDivergent, rejected: tally.rejected,
        max_gap_mnats: tally.maxGapMnats, max_gap_prompt: tally.maxGapAt?.prompt ?? null, max_gap_position: tally.maxGapAt?.position ?? null,
        band_mnats: suite.band_mnats,
        ...(configDifferences.length === 0 ? {} : { config_differences: configDifferences.join("; ") }),
        // Batch-1 speed of this check's own greedy pass (prompt evaluation included): a single-sequence perf row.
        greedy_ms: Math.round(greedyMs * 1000) / 1000,
        generated_tokens: generated,
        ms_per_token: generated === 0 ? null : greedyMs / generated,
        tokens_per_second: generated === 0 ? null : generated / (greedyMs / 1000),
      },
    };
  },
};
