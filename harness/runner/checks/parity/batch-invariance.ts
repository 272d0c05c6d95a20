import type { CheckOutcome } from "../../check.js";
import type { ParityCheck } from "./parity-arm-state.js";

/** Every prompt alone (B = 1) against all of them in one batch: a batched path may only differ by a near-tie. */
export const batchInvarianceCheck: ParityCheck<"batch_invariance"> = {
  kind: "parity",
  name: "batch_invariance",
  needs: ["greedy", "batchedGreedy"],
  level: ({ context }) => context.suite.checks.batch_invariance,
  async run(state, gate): Promise<CheckOutcome> {
    const { arm, prompts } = state.context;
    if (prompts.length < 2) {
      return state.skip("batch_invariance", gate, `one prompt selected: B=1 against B=1 cannot fail (select two or more prompts, e.g. --prompt ${prompts[0] ?? 0} --prompt ${prompts[0] === 0 ? 1 : 0})`);
    }
    const { reference: alone, compared, changed, broken } = await state.againstAlone("batchedGreedy", "its greedy answer alone was rejected");
    const classified = await state.classifyPaths(changed);
    // A difference is only a near-tie if neither path left the band: a batched path that matches the
    // goldens while the alone path diverged (a slot that kept the previous request's state) is the
    // SUT answering by history, and fails here as it does in greedy_parity.
    const aloneClassified = await state.classifyPaths(new Map([...changed.keys()].map((p) => [p, alone.get(p)!])));
    const aloneDivergent = new Set(aloneClassified.filter((r) => r.verdict === "FORWARD-DIVERGENT").map((r) => r.prompt));
    const bad = classified.filter((r) => r.verdict === "FORWARD-DIVERGENT" || aloneDivergent.has(r.prompt));
    await state.record([...compared.map((p) => {
      const result = classified.find((r) => r.prompt === p);
      return state.cell("batch_invariance", gate, {
        prompt: p, status: result !== undefined && bad.includes(result) ? "fail" : "pass",
        gap_mnats: result?.maxGapMnats ?? 0, prompt_class: result === undefined ? "IDENTICAL" : result.verdict,
        detail: result === undefined ? `identical alone and in a batch of ${prompts.length}` : `batched ids differ from alone at token ${result.cells.findIndex((c, j) => c.observedId !== alone.get(p)![j])}; max gap ${result.maxGapMnats} mnats` +
          (aloneDivergent.has(p) ? "; the alone path is forward-divergent from the goldens" : ""),
      });
    }), ...state.brokenCells("batch_invariance", gate, "batched greedy", broken)]);
    return {
      status: bad.length === 0 && broken.length === 0 ? "pass" : "fail",
      summary: `${arm.label} batch invariance (B=1 vs B=${prompts.length}): ${compared.length - changed.size}/${prompts.length} identical, ` +
        `${changed.size - bad.length} near-tie, ${bad.length} forward-divergent` + (broken.length === 0 ? "" : `, ${broken.length} answers rejected`),
      metrics: { batch: prompts.length, identical: compared.length - changed.size, near_tie: changed.size - bad.length, forward_divergent: bad.length, rejected: broken.length },
    };
  },
};
