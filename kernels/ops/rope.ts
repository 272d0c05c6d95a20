import { SeededRandom } from "../../harness/fixtures/seeded-random.js";
import { LIBM_ULPS } from "../envelopes.js";
import { float32Tensor, int32Tensor, sentinelFilled } from "./tensor.js";
import { inputIds, inputValues, movedBytes, SECOND_ORDER, type KernelOp, valueEdges, edge } from "./op.js";

/**
 * Rotary position embedding of the first n_dims dims of each head (llama.cpp rope without YaRN):
 * θ_i = pos · freq_scale · freq_base^(−2i/n_dims); "normal" rotates (x[2i], x[2i+1]), "neox"
 * rotates (x[i], x[i + n_dims/2]); dims from n_dims on are copied.
 */
export const rope: KernelOp<"rope"> = {
  name: "rope",
  encodings: ["F32:F32"],
  params: {
    T: { type: "integer", minimum: 1, description: "tokens" },
    H: { type: "integer", minimum: 1, description: "heads" },
    D: { type: "integer", minimum: 2, description: "head dim" },
    n_dims: { type: "integer", minimum: 2, description: "rotated dims (even, ≤ D): partial rotary when < D" },
    mode: { enum: ["normal", "neox"] },
    max_pos: { type: "integer", minimum: 0, maximum: 16777215, description: "positions are drawn from 0..max_pos" },
  },
  optional: { freq_base: 10000, freq_scale: 1 },
  check: (params) => ((params.n_dims as number) % 2 !== 0 || (params.n_dims as number) > (params.D as number) ? "n_dims must be even and at most D" : undefined),
  bound: "rope",
  edges: () => ({
    base: { T: 4, H: 2, D: 64, n_dims: 64, mode: "normal", max_pos: 4095 },
    axes: {
      mode: valueEdges("mode", ["neox"]),
      n_dims: [edge("n_dims=2", { n_dims: 2 }), edge("partial, neox", { n_dims: 16, mode: "neox" }), edge("partial, normal", { n_dims: 16, D: 80 })],
      max_pos: valueEdges("max_pos", [0, 1, 1000000]),
      freq: [edge("freq_base=1e6", { freq_base: 1000000 }), edge("freq_scale=0.25", { freq_scale: 0.25 })],
      T: valueEdges("T", [1, 33]),
    },
  }),
  native: "rope.c",
  build(params, encoding, seed) {
    const [T, H, D] = ["T", "H", "D"].map((name) => params[name] as number);
    const random = new SeededRandom(seed);
    const maxPos = params.max_pos as number;
    const pos = Int32Array.from({ length: T }, (_, t) => (t === 0 ? maxPos : Math.floor(random.uniform() * (maxPos + 1))));
    return {
      op: "rope", encoding: `${encoding.input}:${encoding.output}`,
      inputs: [float32Tensor("x", [T, H, D], random.normalArray(T * H * D, 1)), int32Tensor("pos", [T], pos)],
      outputs: [sentinelFilled("y", "F32", [T, H, D])],
      attrs: { mode: params.mode, n_dims: params.n_dims, freq_base: (params.freq_base as number | undefined) ?? 10000, freq_scale: (params.freq_scale as number | undefined) ?? 1 },
    };
  },
  reference(problem, { u }) {
    const [T, H, D] = problem.outputs[0].shape;
    const x = inputValues(problem, "x");
    const pos = inputIds(problem, "pos");
    const nDims = problem.attrs.n_dims as number;
    const base = Math.fround(problem.attrs.freq_base as number);
    const freqScale = Math.fround(problem.attrs.freq_scale as number);
    const neox = problem.attrs.mode === "neox";
    // freq_base^(−2/n_dims) in float32: the exponent's rounding scaled by |ln base · 2/n_dims|, and one libm call.
    const stepError = LIBM_ULPS * u + Math.abs(Math.log(base) * 2 / nDims) * u;
    const value = Float64Array.from(x);
    const bound = new Float64Array(x.length);
    for (let t = 0; t < T; t++) {
      for (let h = 0; h < H; h++) {
        const row = (t * H + h) * D;
        for (let i = 0; i < nDims / 2; i++) {
          const theta = pos[t] * freqScale * base ** (-2 * i / nDims);
          // θ_i by i float32 products by the step (llama.cpp's recurrence), then × freq_scale.
          const angleError = Math.abs(theta) * (i * (stepError + u) + u);
          const c = Math.cos(theta);
          const s = Math.sin(theta);
          const trigError = angleError + LIBM_ULPS * u;
          const [ia, ib] = neox ? [row + i, row + i + nDims / 2] : [row + 2 * i, row + 2 * i + 1];
          const a = x[ia];
          const b = x[ib];
          value[ia] = a * c - b * s;
          value[ib] = a * s + b * c;
          // |a|·e_c + |b|·e_s, and two products and a sum rounded (2u of the computed magnitudes).
          const e = (Math.abs(a) + Math.abs(b)) * trigError;
          bound[ia] = (e + 2 * u * (Math.abs(a) * (Math.abs(c) + trigError) + Math.abs(b) * (Math.abs(s) + trigError))) * SECOND_ORDER;
          bound[ib] = (e + 2 * u * (Math.abs(a) * (Math.abs(s) + trigError) + Math.abs(b) * (Math.abs(c) + trigError))) * SECOND_ORDER;
        }
      }
    }
    return [{ kind: "bounded", value, bound }];
  },
  counts: (problem) => {
    const [T, H] = problem.outputs[0].shape;
    return { bytes: movedBytes(problem), flops: 3 * T * H * (problem.attrs.n_dims as number) };
  },
};
