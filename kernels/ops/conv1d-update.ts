import { SeededRandom } from "../../harness/fixtures/seeded-random.js";
import { float32Tensor, sentinelFilled } from "./tensor.js";
import { LIBM_ULPS } from "../envelopes.js";
import { edge, inputTensor, inputValues, movedBytes, SECOND_ORDER, type KernelOp, type OpAttrs, valueEdges } from "./op.js";
import { boundedDots } from "./dot-products.js";

/**
 * One token of a causal depthwise conv1d with its rolling state (llama.cpp ssm_conv on
 * state ++ x): window_c = state_in[c] ++ x[c]; y[c] = Σ_k window_c[k]·w[c, k]; state_out[c] is the
 * window's last W − 1 values (bit-exact: a shift, no arithmetic). With `silu`, y[c] is passed
 * through SiLU in the kernel, as Mamba and Qwen3-Next's conv layers do (vLLM's causal_conv1d_update
 * with activation "silu").
 */
export const conv1dUpdate: KernelOp<"conv1d_update"> = {
  name: "conv1d_update",
  encodings: ["F32:F32"],
  params: {
    C: { type: "integer", minimum: 1, description: "channels" },
    W: { type: "integer", minimum: 2, description: "kernel width (the state holds W − 1 steps)" },
  },
  optional: { silu: false },
  bound: "dot(W)",
  edges: () => ({ base: { C: 64, W: 4 }, axes: { C: valueEdges("C", [1, 33, 4096]), W: valueEdges("W", [2, 3, 8]), silu: [edge("fused SiLU", { silu: true }), edge("fused SiLU, W=2", { silu: true, W: 2 })] } }),
  native: "recurrent.c",
  build(params, encoding, seed) {
    const [C, W] = ["C", "W"].map((name) => params[name] as number);
    const random = new SeededRandom(seed);
    return {
      op: "conv1d_update", encoding: `${encoding.input}:${encoding.output}`,
      inputs: [float32Tensor("x", [C], random.normalArray(C, 1)), float32Tensor("w", [C, W], random.normalArray(C * W, 0.5)), float32Tensor("state_in", [C, W - 1], random.normalArray(C * (W - 1), 1))],
      // The attribute only when the case sets it, so a case without it reaches plugins that know none.
      outputs: [sentinelFilled("y", "F32", [C]), sentinelFilled("state_out", "F32", [C, W - 1])], attrs: params.silu === undefined ? {} : ({ silu: params.silu } as OpAttrs),
    };
  },
  reference(problem, { u }) {
    const [C, W] = inputTensor(problem, "w").shape;
    const x = inputValues(problem, "x");
    const state = inputValues(problem, "state_in");
    const windows = new Float32Array(C * W);
    const shifted = new Float32Array(C * (W - 1));
    for (let c = 0; c < C; c++) {
      windows.set(state.subarray(c * (W - 1), (c + 1) * (W - 1)), c * W);
      windows[c * W + W - 1] = x[c];
      shifted.set(windows.subarray(c * W + 1, (c + 1) * W), c * (W - 1));
    }
    const w = inputValues(problem, "w");
    const dots = boundedDots(C, W, (c) => ({ w, wAt: c * W, x: windows, xAt: c * W }), "F32", u);
    if (problem.attrs.silu === true) {
      for (let c = 0; c < C; c++) {
        const d = dots.value[c];
        const sigma = 1 / (1 + Math.exp(-d));
        const y = d * sigma;
        // The dot's error through SiLU's slope σ(d)(1 + d(1 − σ(d))), then SiLU's own: e^(−d) (L), 1 + e (u), the quotient (u), the product (u).
        dots.bound[c] = (Math.abs(sigma * (1 + d * (1 - sigma))) * dots.bound[c] + Math.abs(y) * (LIBM_ULPS + 3) * u) * SECOND_ORDER;
        dots.value[c] = y;
      }
    }
    return [
      { kind: "bounded", ...dots },
      { kind: "exact", data: new Uint8Array(shifted.buffer) },
    ];
  },
  counts: (problem) => {
    const [C, W] = inputTensor(problem, "w").shape;
    return { bytes: movedBytes(problem), flops: 2 * C * W };
  },
};
