import type { ParityCheck } from "./parity-arm-state.js";

/** The SUT's tokenizer must give the goldens' prompt ids: a drift names its first differing position. */
export const tokenizerCheck: ParityCheck<"tokenizer"> = {
  kind: "parity",
  name: "tokenizer",
  needs: ["tokenize"],
  level: ({ context }) => context.suite.checks.tokenizer,
  async run(state, gate) {
    const { suite, arm, sut, goldens, prompts } = state.context;
    const ids = await sut.tokenize!(prompts.map((p) => suite.prompts[p]));
    const drifted = prompts.filter((p, i) => ids[i].join(",") !== goldens.promptIds[p].join(","));
    await state.record(prompts.map((p, i) => {
      const at = ids[i].findIndex((id, j) => id !== goldens.promptIds[p][j]);
      return state.cell("tokenizer", gate, {
        prompt: p, status: drifted.includes(p) ? "fail" : "pass",
        position: drifted.includes(p) ? (at < 0 ? ids[i].length : at) : null,
        expected_id: drifted.includes(p) ? (goldens.promptIds[p][at < 0 ? ids[i].length : at] ?? null) : null,
        observed_id: drifted.includes(p) && at >= 0 ? ids[i][at] : null,
        detail: drifted.includes(p) ? "the SUT's tokenizer gives other prompt ids than the oracle's" : "same prompt ids as the goldens",
      });
    }));
    return {
      status: drifted.length === 0 ? "pass" : "fail",
      summary: `${arm.label} tokenizer: ${prompts.length - drifted.length}/${prompts.length} prompts tokenize to the goldens' ids`,
      metrics: { prompts: prompts.length, drifted: drifted.length },
    };
  },
};
