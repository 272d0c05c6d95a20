import { askGreedy } from "../../../sut/answer-shape.js";
import type { CheckOutcome } from "../../check.js";
import type { ParityCheck } from "./parity-arm-state.js";

/** Two traced passes: every captured graph must report the same memory demand both times. */
export const captureStableCheck: ParityCheck<"capture_stable"> = {
  kind: "parity",
  name: "capture_stable",
  needs: ["tracedGreedy", "traceDemand"],
  level: ({ context }) => context.suite.checks.capture_stable,
  async run(state, gate): Promise<CheckOutcome> {
    const { arm, sut, vocabSize } = state.context;
    // Each traced greedy batch captures the decode graph anew: the demand each capture reports must be the same.
    const capture = async () => {
      await askGreedy(sut, "tracedGreedy", state.greedyRequests(), vocabSize);
      return new Map((await sut.traceDemand!()).map((c) => [c.capture, c.demandBytes] as const));
    };
    const [first, second] = [await capture(), await capture()];
    if (first.size === 0 && second.size === 0) return state.skip("capture_stable", gate, `${sut.label} reported no captured graph after a traced pass: no demand to compare`);
    const names = [...new Set([...first.keys(), ...second.keys()])];
    const shown = (bytes: number | undefined) => (bytes === undefined ? "no capture" : `${bytes} B`);
    const unstable = names.filter((name) => first.get(name) !== second.get(name));
    await state.record(names.map((name) => state.cell("capture_stable", gate, {
      status: unstable.includes(name) ? "fail" : "pass",
      detail: `capture ${name}: ${shown(first.get(name))}, then ${shown(second.get(name))}`,
    })));
    return {
      status: unstable.length === 0 ? "pass" : "fail",
      summary: `${arm.label} capture stability: ${names.length - unstable.length}/${names.length} captured graphs report the same demand twice` +
        unstable.map((name) => `; ${name}: ${shown(first.get(name))} then ${shown(second.get(name))}`).join("") +
        (unstable.length === 0 ? "" : " — a capture that depends on what ran before it (buffers kept from an earlier capture, a size read from the first request)"),
      metrics: { captures: names.length, unstable: unstable.length, demand_bytes_max: Math.max(...[...first.values(), ...second.values()]) },
    };
  },
};
