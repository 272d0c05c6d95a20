import { SeededRandom } from "../../harness/fixtures/seeded-random.js";
import { FLOAT32_SUBNORMAL_STEP } from "../envelopes.js";
import { elementCount, float32Tensor, sentinelFilled } from "./tensor.js";
import { inputValues, movedBytes, SECOND_ORDER, type KernelOp, valueEdges } from "./op.js";
import { ROW_PARAMS, rowShape } from "./rows.js";
import { boundedSoftmax } from "./softmax-bound.js";

/** y = softmax(scale · x) per row, max-subtracted (llama.cpp soft_max without mask). */
export const softmax: KernelOp<"softmax"> = {
  name: "softmax",
  encodings: ["F32:F32"],
  params: ROW_PARAMS,
  optional: { scale: 1 },
  bound: "softmax",
  // Logit scale 40 drives exponents to −10³: underflow everywhere, and overflow for a kernel that skips the max.
  edges: () => ({ base: { R: 4, N: 256 }, axes: { N: valueEdges("N", [1, 2, 17, 4096]), R: valueEdges("R", [1, 33]), scale: valueEdges("scale", [40, 6, 1e-3, -8]) } }),
  native: "activations.c",
  build(params, encoding, seed) {
    const [R, N] = rowShape(params);
    return {
      op: "softmax", encoding: `${encoding.input}:${encoding.output}`,
      inputs: [float32Tensor("x", [R, N], new SeededRandom(seed).normalArray(R * N, 3))],
      outputs: [sentinelFilled("y", "F32", [R, N])], attrs: { scale: (params.scale as number | undefined) ?? 1 },
    };
  },
  reference(problem, { u }) {
    const [R, N] = problem.outputs[0].shape;
    const x = inputValues(problem, "x");
    const scale = Math.fround(problem.attrs.scale as number);
    const value = new Float64Array(R * N);
    const bound = new Float64Array(R * N);
    for (let r = 0; r < R; r++) {
      const s = boundedSoftmax(x.subarray(r * N, (r + 1) * N), scale, u);
      for (let i = 0; i < N; i++) {
        const y = s.e[i] / s.sum;
        value[r * N + i] = y;
        // e_i and Σ errors, then a division (or a reciprocal and a product: 2u); underflow: e_i's
        // absolute error over Σ ≥ 1, and half a subnormal step for the quotient's own rounding.
        bound[r * N + i] = (y * (s.termError[i] + s.sumError + 2 * u) + s.termAbsolute / s.sum + FLOAT32_SUBNORMAL_STEP / 2) * SECOND_ORDER;
      }
    }
    return [{ kind: "bounded", value, bound }];
  },
  counts: (problem) => ({ bytes: movedBytes(problem), flops: 4 * elementCount(problem.outputs[0].shape) }),
};
