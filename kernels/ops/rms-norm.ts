import { SeededRandom } from "../../harness/fixtures/seeded-random.js";
import { gamma, storedBound } from "../envelopes.js";
import { elementCount, float32Tensor, sentinelFilled, type OutputDtype } from "./tensor.js";
import { inputValues, movedBytes, SECOND_ORDER, type KernelOp, valueEdges } from "./op.js";
import { ROW_PARAMS, rowShape } from "./rows.js";

/** y = x · (1/√(mean(x²) + eps)) · w per row: llama.cpp's rms_norm fused with the weight multiply. */
export const rmsNorm: KernelOp<"rms_norm"> = {
  name: "rms_norm",
  encodings: ["F32:F32", "F32:BF16"],
  params: ROW_PARAMS,
  optional: { eps: 1e-6 },
  bound: "rms_norm",
  edges: () => ({ base: { R: 4, N: 256 }, axes: { N: valueEdges("N", [1, 16, 17, 4096]), R: valueEdges("R", [1, 33]), eps: valueEdges("eps", [1e-2, 0]) } }),
  native: "norms.c",
  build(params, encoding, seed) {
    const [R, N] = rowShape(params);
    const random = new SeededRandom(seed);
    return {
      op: "rms_norm", encoding: `${encoding.input}:${encoding.output}`,
      inputs: [float32Tensor("x", [R, N], random.normalArray(R * N, 2)), float32Tensor("w", [N], random.normalArray(N, 1))],
      outputs: [sentinelFilled("y", encoding.output, [R, N])], attrs: { eps: (params.eps as number | undefined) ?? 1e-6 },
    };
  },
  reference(problem, { u }) {
    const [R, N] = problem.outputs[0].shape;
    const x = inputValues(problem, "x");
    const w = inputValues(problem, "w");
    const eps = Math.fround(problem.attrs.eps as number);
    // Σx² (γ_{N+1}), /N and +eps (u each) halve under √ (u), 1/· (u), two products (2u).
    const relative = (gamma(N + 1, u) + 2 * u) / 2 + 4 * u;
    const value = new Float64Array(R * N);
    const bound = new Float64Array(R * N);
    for (let r = 0; r < R; r++) {
      let squares = 0;
      for (let i = 0; i < N; i++) squares += x[r * N + i] ** 2;
      const scale = 1 / Math.sqrt(squares / N + eps);
      for (let i = 0; i < N; i++) {
        const y = x[r * N + i] * scale * w[i];
        value[r * N + i] = y;
        bound[r * N + i] = storedBound(Math.abs(y) * relative * SECOND_ORDER, y, problem.outputs[0].dtype as OutputDtype);
      }
    }
    return [{ kind: "bounded", value, bound }];
  },
  counts: (problem) => ({ bytes: movedBytes(problem), flops: 4 * elementCount(problem.outputs[0].shape) }),
};
