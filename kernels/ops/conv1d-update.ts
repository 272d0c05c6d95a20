import { SeededRandom } from "../../harness/fixtures/seeded-random.js";
import { float32Tensor, sentinelFilled } from "./tensor.js";
import { inputTensor, inputValues, movedBytes, type KernelOp } from "./op.js";
import { boundedDots } from "./dot-products.js";

/**
 * One token of a causal depthwise conv1d with its rolling state (llama.cpp ssm_conv on
 * state ++ x): window_c = state_in[c] ++ x[c]; y[c] = Σ_k window_c[k]·w[c, k]; state_out[c] is the
 * window's last W − 1 values (bit-exact: a shift, no arithmetic).
 */
export const conv1dUpdate: KernelOp<"conv1d_update"> = {
  name: "conv1d_update",
  encodings: ["F32:F32"],
  params: {
    C: { type: "integer", minimum: 1, description: "channels" },
    W: { type: "integer", minimum: 2, description: "kernel width (the state holds W − 1 steps)" },
  },
  bound: "dot(W)",
  native: "recurrent.c",
  build(params, encoding, seed) {
    const [C, W] = ["C", "W"].map((name) => params[name] as number);
    const random = new SeededRandom(seed);
    return {
      op: "conv1d_update", encoding: `${encoding.input}:${encoding.output}`,
      inputs: [float32Tensor("x", [C], random.normalArray(C, 1)), float32Tensor("w", [C, W], random.normalArray(C * W, 0.5)), float32Tensor("state_in", [C, W - 1], random.normalArray(C * (W - 1), 1))],
      outputs: [sentinelFilled("y", "F32", [C]), sentinelFilled("state_out", "F32", [C, W - 1])], attrs: {},
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
    return [
      { kind: "bounded", ...boundedDots(C, W, (c) => ({ w, wAt: c * W, x: windows, xAt: c * W }), "F32", u) },
      { kind: "exact", data: new Uint8Array(shifted.buffer) },
    ];
  },
  counts: (problem) => {
    const [C, W] = inputTensor(problem, "w").shape;
    return { bytes: movedBytes(problem), flops: 2 * C * W };
  },
};
