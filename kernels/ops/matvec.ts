import { SeededRandom } from "../../harness/fixtures/seeded-random.js";
import { encodeValues, float32Tensor, sentinelFilled, type OutputDtype } from "./tensor.js";
import { inputTensor, inputValues, movedBytes, type KernelOp } from "./op.js";
import { boundedDots } from "./dot-products.js";

/** y[r] = Σ_k w[r,k]·x[k]: W rows × cols of a ggml type (decoded exactly), x float32. */
export const matvec: KernelOp<"matvec"> = {
  name: "matvec",
  encodings: ["F32:F32", "Q8_0:F32", "Q4_K:F32", "Q5_K:F32", "Q6_K:F32"],
  params: { rows: { type: "integer", minimum: 1 }, cols: { type: "integer", minimum: 1, description: "a whole number of the type's blocks" } },
  bound: "dot(K)",
  native: "quantized.c",
  build(params, encoding, seed) {
    const rows = params.rows as number;
    const cols = params.cols as number;
    const random = new SeededRandom(seed);
    const w = encodeValues(encoding.input, random.normalArray(rows * cols, 1 / Math.sqrt(cols)));
    return {
      op: "matvec", encoding: `${encoding.input}:${encoding.output}`,
      inputs: [{ name: "w", dtype: encoding.input, shape: [rows, cols], data: w }, float32Tensor("x", [cols], random.normalArray(cols, 1))],
      outputs: [sentinelFilled("y", encoding.output, [rows])], attrs: {},
    };
  },
  reference(problem, { u }) {
    const [rows, cols] = inputTensor(problem, "w").shape;
    const w = inputValues(problem, "w");
    const x = inputValues(problem, "x");
    return [{ kind: "bounded", ...boundedDots(rows, cols, (r) => ({ w, wAt: r * cols, x, xAt: 0 }), problem.outputs[0].dtype as OutputDtype, u) }];
  },
  counts: (problem) => {
    const [rows, cols] = inputTensor(problem, "w").shape;
    return { bytes: movedBytes(problem), flops: 2 * rows * cols };
  },
};
