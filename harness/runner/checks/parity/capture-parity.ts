import type { ParityCheck } from "./parity-arm-state.js";

/** The traced (captured and replayed) decode against the eager one: a traced path may only differ by a near-tie. */
export const captureParityCheck: ParityCheck<"capture_parity"> = {
  kind: "parity",
  name: "capture_parity",
  needs: ["greedy", "tracedGreedy"],
  level: ({ context }) => context.suite.checks.capture_parity,
  async run(state, gate) {
    const { arm, prompts } = state.context;
    const { reference: eager, compared, changed, broken } = await state.againstAlone("tracedGreedy", "its eager greedy answer was rejected");
    const classified = await state.classifyPaths(changed);
    const bad = classified.filter((r) => r.verdict === "FORWARD-DIVERGENT");
    const firstDifference = (p: number) => {
      const at = changed.get(p)!.findIndex((id, j) => id !== eager.get(p)![j]);
      return `traced ids differ from eager at token ${at} (eager ${eager.get(p)![at]}, traced ${changed.get(p)![at]})`;
    };
    await state.record([...compared.map((p) => {
      const result = classified.find((r) => r.prompt === p);
      return state.cell("capture_parity", gate, {
        prompt: p, status: result !== undefined && bad.includes(result) ? "fail" : "pass",
        gap_mnats: result?.maxGapMnats ?? 0, prompt_class: result === undefined ? "IDENTICAL" : result.verdict,
        detail: result === undefined ? "traced ids equal eager ids" : `${firstDifference(p)}; the traced path is ${result.verdict} against the oracle (max gap ${result.maxGapMnats} mnats)`,
      });
    }), ...state.brokenCells("capture_parity", gate, "traced greedy", broken)]);
    const worst = bad[0] ?? classified[0];
    return {
      status: bad.length === 0 && broken.length === 0 ? "pass" : "fail",
      summary: `${arm.label} capture parity (traced vs eager): ${compared.length - changed.size}/${prompts.length} identical, ${changed.size - bad.length} near-tie, ${bad.length} forward-divergent` +
        (broken.length === 0 ? "" : `, ${broken.length} answers rejected`) +
        (worst === undefined ? "" : `; prompt ${worst.prompt}: ${firstDifference(worst.prompt)}, ${worst.verdict} (max gap ${worst.maxGapMnats} mnats)`) +
        (bad.length === 0 ? "" : " — the replayed graph computes something else than the eager one: an input baked into the capture as a constant (a position, a cache length, expert ids read back to the host) or a buffer the replay does not rewrite or that aliases memory it does not own (a request's state bound at capture)"),
      metrics: { prompts: prompts.length, identical: compared.length - changed.size, near_tie: changed.size - bad.length, forward_divergent: bad.length, rejected: broken.length },
    };
  },
};
