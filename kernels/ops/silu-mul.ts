import { SeededRandom } from "../../harness/fixtures/seeded-random.js";
import { LIBM_ULPS, storedBound } from "../envelopes.js";
import { elementCount, float32Tensor, sentinelFilled, type OutputDtype } from "./tensor.js";
import { inputValues, movedBytes, SECOND_ORDER, type KernelOp, valueEdges } from "./op.js";
import { ROW_PARAMS, rowShape } from "./rows.js";

/** y = silu(gate) · up = gate / (1 + e^(−gate)) · up (ggml swiglu, the SwiGLU FFN's middle). */
export const siluMul: KernelOp<"silu_mul"> = {
  name: "silu_mul",
  encodings: ["F32:F32", "F32:BF16"],
  params: ROW_PARAMS,
  bound: "silu_mul",
  edges: () => ({ base: { R: 4, N: 256 }, axes: { N: valueEdges("N", [1, 17, 4096]), R: valueEdges("R", [1, 33]) } }),
  native: "activations.c",
  build(params, encoding, seed) {
    const [R, N] = rowShape(params);
    const random = new SeededRandom(seed);
    return {
      op: "silu_mul", encoding: `${encoding.input}:${encoding.output}`,
      // A wide gate: both tails of the sigmoid and its middle are exercised.
      inputs: [float32Tensor("gate", [R, N], random.normalArray(R * N, 4)), float32Tensor("up", [R, N], random.normalArray(R * N, 1))],
      outputs: [sentinelFilled("y", encoding.output, [R, N])], attrs: {},
    };
  },
  reference(problem, { u }) {
    const gate = inputValues(problem, "gate");
    const up = inputValues(problem, "up");
    // e^(−g) (one libm call), 1 + e (u), then a division or a reciprocal and a product (2u), times up (u).
    const relative = (LIBM_ULPS + 4) * u * SECOND_ORDER;
    const value = Float64Array.from(gate, (g, i) => (g / (1 + Math.exp(-g))) * up[i]);
    const output = problem.outputs[0].dtype as OutputDtype;
    return [{ kind: "bounded", value, bound: value.map((y) => storedBound(Math.abs(y) * relative, y, output)) }];
  },
  counts: (problem) => ({ bytes: movedBytes(problem), flops: 5 * elementCount(problem.outputs[0].shape) }),
};
