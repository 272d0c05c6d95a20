import { SeededRandom } from "../../harness/fixtures/seeded-random.js";
import { EXPF_OVERFLOW_ARGUMENT, FLOAT32_SUBNORMAL_STEP, gamma, LIBM_ULPS } from "../envelopes.js";
import { float32Tensor, sentinelFilled } from "./tensor.js";
import { inputTensor, inputValues, movedBytes, SECOND_ORDER, type KernelOp, valueEdges, edge } from "./op.js";
import { boundedSoftmax } from "./softmax-bound.js";

/** Expert order: larger logit first, ties to the lower expert index (docs/kernel-ops.md, "moe top-k ties"). */
export function rankExperts(logits: ArrayLike<number>): number[] {
  return Array.from({ length: logits.length }, (_, i) => i).sort((a, b) => logits[b] - logits[a] || a - b);
}

/**
 * The MoE router (llama.cpp build_moe_ffn): p = softmax or sigmoid of the logits; the k experts
 * of largest p, in descending order; their p as weights, divided by their sum when `norm`, times
 * `scale`.
 */
export const moeTopk: KernelOp<"moe_topk"> = {
  name: "moe_topk",
  encodings: ["F32:F32"],
  params: {
    T: { type: "integer", minimum: 1, description: "tokens" },
    E: { type: "integer", minimum: 2, description: "experts" },
    k: { type: "integer", minimum: 1, description: "experts used per token" },
    gating: { enum: ["softmax", "sigmoid"] },
    norm: { type: "boolean", description: "divide the k weights by their sum" },
  },
  optional: { scale: 1, logit_scale: 1 },
  check: (params) => ((params.k as number) >= (params.E as number) ? "k must be below E" : undefined),
  bound: "moe",
  edges: () => ({
    base: { T: 4, E: 16, k: 4, gating: "softmax", norm: false },
    axes: {
      gating: [edge("sigmoid, normalised", { gating: "sigmoid", norm: true }), edge("softmax, normalised, scaled", { norm: true, scale: 2.5 })],
      k: [edge("k=1", { k: 1 }), edge("k=E−1", { k: 15 })],
      E: [edge("E=2", { E: 2, k: 1 }), edge("E=256", { E: 256, k: 8 })],
      T: valueEdges("T", [1, 33]),
      // Softmax probabilities down to e^−200: underflow, and ties planted among them.
      logit_scale: valueEdges("logit_scale", [30]),
    },
  }),
  native: "moe.c",
  build(params, encoding, seed) {
    const [T, E, k] = ["T", "E", "k"].map((name) => params[name] as number);
    const random = new SeededRandom(seed);
    // Logits on a grid of eighths (times logit_scale, a whole number): equal logits (ties) are common, distinct ones stay far apart in float32.
    const logitScale = (params.logit_scale as number | undefined) ?? 1;
    const logits = Float32Array.from({ length: T * E }, () => (Math.round(random.normal(1) * 8) / 8) * logitScale);
    // Plant a tie across the k-th place: in row 0 a later expert equals the k-th (the earlier must stay),
    // in row 1 an earlier one does (it must take the place).
    for (const [row, later] of [[0, true], [1, false]] as const) {
      if (row >= T) break;
      const z = logits.subarray(row * E, (row + 1) * E);
      const order = rankExperts(z);
      const kth = order[k - 1];
      const outside = order.slice(k).filter((i) => (later ? i > kth : i < kth));
      const other = outside.length > 0 ? outside[0] : order[k];
      z[other] = z[kth];
    }
    return {
      op: "moe_topk", encoding: `${encoding.input}:${encoding.output}`,
      inputs: [float32Tensor("logits", [T, E], logits)],
      outputs: [sentinelFilled("ids", "I32", [T, k]), sentinelFilled("weights", "F32", [T, k])],
      attrs: { k, gating: params.gating, norm: params.norm, scale: (params.scale as number | undefined) ?? 1 },
    };
  },
  reference(problem, { u }) {
    const [T, E] = inputTensor(problem, "logits").shape;
    const k = problem.attrs.k as number;
    const logits = inputValues(problem, "logits");
    const scale = Math.fround(problem.attrs.scale as number);
    const ids = new Int32Array(T * k);
    const weights = new Float64Array(T * k);
    const bound = new Float64Array(T * k);
    for (let t = 0; t < T; t++) {
      const z = logits.subarray(t * E, (t + 1) * E);
      const chosen = rankExperts(z).slice(0, k);
      let p: number[];
      let pError: number[];
      let pAbsolute: number[];
      if (problem.attrs.gating === "softmax") {
        const soft = boundedSoftmax(z, 1, u);
        p = chosen.map((i) => soft.e[i] / soft.sum);
        pError = chosen.map((i) => soft.termError[i] + soft.sumError + 2 * u);
        // Underflow: e_i's absolute error over Σ ≥ 1, and half a step for the quotient.
        pAbsolute = chosen.map(() => soft.termAbsolute / soft.sum + FLOAT32_SUBNORMAL_STEP / 2);
      } else {
        // 1/(1 + e^(−z)): one libm call, 1 + e (u), a reciprocal (u).
        p = chosen.map((i) => 1 / (1 + Math.exp(-z[i])));
        pError = chosen.map(() => (LIBM_ULPS + 2) * u);
        // e^(−z) overflowing to +Inf makes p exactly 0, which is admitted (p < 3.2e-39 there);
        // otherwise an underflowing e^(−z) (one step, against 1 + e ≥ 1) and a subnormal reciprocal (half a step).
        pAbsolute = chosen.map((i, j) => (-z[i] > EXPF_OVERFLOW_ARGUMENT ? p[j] : 1.5 * FLOAT32_SUBNORMAL_STEP));
      }
      const total = p.reduce((a, b) => a + b, 0);
      const totalAbsolute = pAbsolute.reduce((a, b) => a + b, 0);
      const worst = Math.max(...pError);
      chosen.forEach((id, j) => {
        ids[t * k + j] = id;
        const unscaled = problem.attrs.norm ? p[j] / total : p[j];
        const w = unscaled * scale;
        weights[t * k + j] = w;
        // The sum of k weights (their errors, γ_{k−1}) and a division; the product by scale (u).
        const relative = problem.attrs.norm ? pError[j] + worst + gamma(Math.max(1, k - 1), u) + 2 * u : pError[j];
        // Underflow, carried the same way: p's absolute error (and the sum's, relative to it) over the sum, half a step per quotient and product.
        const absolute = problem.attrs.norm ? (pAbsolute[j] + unscaled * totalAbsolute) / total + FLOAT32_SUBNORMAL_STEP / 2 : pAbsolute[j];
        bound[t * k + j] = (Math.abs(w) * (relative + (scale === 1 ? 0 : u)) + Math.abs(scale) * absolute + (scale === 1 ? 0 : FLOAT32_SUBNORMAL_STEP / 2)) * SECOND_ORDER;
      });
    }
    return [{ kind: "exact", data: new Uint8Array(ids.buffer) }, { kind: "bounded", value: weights, bound }];
  },
  counts: (problem) => {
    const [T, E] = inputTensor(problem, "logits").shape;
    return { bytes: movedBytes(problem), flops: 4 * T * E };
  },
};
