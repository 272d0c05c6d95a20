import { SeededRandom } from "../../harness/fixtures/seeded-random.js";
import { gamma, LIBM_ULPS } from "../envelopes.js";
import { float32Tensor, sentinelFilled } from "./tensor.js";
import { inputTensor, inputValues, movedBytes, SECOND_ORDER, type KernelOp } from "./op.js";
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
  optional: { scale: 1 },
  check: (params) => ((params.k as number) >= (params.E as number) ? "k must be below E" : undefined),
  bound: "moe",
  native: "moe.c",
  build(params, encoding, seed) {
    const [T, E, k] = ["T", "E", "k"].map((name) => params[name] as number);
    const random = new SeededRandom(seed);
    // Logits on a grid of eighths: equal logits (ties) are common, distinct ones stay far apart in float32.
    const logits = Float32Array.from({ length: T * E }, () => Math.round(random.normal(1) * 8) / 8);
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
      if (problem.attrs.gating === "softmax") {
        const soft = boundedSoftmax(z, 1, u);
        p = chosen.map((i) => soft.e[i] / soft.sum);
        pError = chosen.map((i) => soft.termError[i] + soft.sumError + 2 * u);
      } else {
        // 1/(1 + e^(−z)): one libm call, 1 + e (u), a reciprocal (u).
        p = chosen.map((i) => 1 / (1 + Math.exp(-z[i])));
        pError = chosen.map(() => (LIBM_ULPS + 2) * u);
      }
      const total = p.reduce((a, b) => a + b, 0);
      const worst = Math.max(...pError);
      chosen.forEach((id, j) => {
        ids[t * k + j] = id;
        const w = (problem.attrs.norm ? p[j] / total : p[j]) * scale;
        weights[t * k + j] = w;
        // The sum of k weights (their errors, γ_{k−1}) and a division; the product by scale (u).
        const relative = problem.attrs.norm ? pError[j] + worst + gamma(Math.max(1, k - 1), u) + 2 * u : pError[j];
        bound[t * k + j] = Math.abs(w) * (relative + (scale === 1 ? 0 : u)) * SECOND_ORDER;
      });
    }
    return [{ kind: "exact", data: new Uint8Array(ids.buffer) }, { kind: "bounded", value: weights, bound }];
  },
  counts: (problem) => {
    const [T, E] = inputTensor(problem, "logits").shape;
    return { bytes: movedBytes(problem), flops: 4 * T * E };
  },
};
