import { SeededRandom } from "../../harness/fixtures/seeded-random.js";
import { gamma } from "../envelopes.js";
import { elementCount, float32Tensor, sentinelFilled } from "./tensor.js";
import { inputValues, movedBytes, SECOND_ORDER, type KernelOp, valueEdges } from "./op.js";
import { ROW_PARAMS, rowShape } from "./rows.js";

/** y = x / max(√Σx², eps) per row (llama.cpp l2_norm, as gated delta nets normalize q and k). */
export const l2Norm: KernelOp<"l2_norm"> = {
  name: "l2_norm",
  encodings: ["F32:F32"],
  params: ROW_PARAMS,
  optional: { eps: 1e-6 },
  bound: "l2_norm",
  edges: () => ({ base: { R: 4, N: 128 }, axes: { N: valueEdges("N", [1, 16, 17, 4096]), R: valueEdges("R", [1, 33]), eps: valueEdges("eps", [1e-2]) } }),
  native: "norms.c",
  build(params, encoding, seed) {
    const [R, N] = rowShape(params);
    return {
      op: "l2_norm", encoding: `${encoding.input}:${encoding.output}`,
      inputs: [float32Tensor("x", [R, N], new SeededRandom(seed).normalArray(R * N, 1))],
      outputs: [sentinelFilled("y", "F32", [R, N])], attrs: { eps: (params.eps as number | undefined) ?? 1e-6 },
    };
  },
  reference(problem, { u }) {
    const [R, N] = problem.outputs[0].shape;
    const x = inputValues(problem, "x");
    const eps = Math.fround(problem.attrs.eps as number);
    // Σx² (γ_{N+1}) halves under √ (u); 1/max (u) and the product (u), or one division.
    const relative = gamma(N + 1, u) / 2 + 3 * u;
    const value = new Float64Array(R * N);
    const bound = new Float64Array(R * N);
    for (let r = 0; r < R; r++) {
      let squares = 0;
      for (let i = 0; i < N; i++) squares += x[r * N + i] ** 2;
      const scale = 1 / Math.max(Math.sqrt(squares), eps);
      for (let i = 0; i < N; i++) {
        value[r * N + i] = x[r * N + i] * scale;
        bound[r * N + i] = Math.abs(value[r * N + i]) * relative * SECOND_ORDER;
      }
    }
    return [{ kind: "bounded", value, bound }];
  },
  counts: (problem) => ({ bytes: movedBytes(problem), flops: 3 * elementCount(problem.outputs[0].shape) }),
};
