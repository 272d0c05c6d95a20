import { SeededRandom } from "../../harness/fixtures/seeded-random.js";
import { DTYPES, encodeValues, float32Tensor, sentinelFilled, type OutputDtype } from "./tensor.js";
import { inputTensor, inputValues, movedBytes, type KernelOp, valueEdges } from "./op.js";
import { boundedDots } from "./dot-products.js";

/** y[r] = Σ_k w[r,k]·x[k]: W rows × cols of a ggml type (decoded exactly), x float32. */
export const matvec: KernelOp<"matvec"> = {
  name: "matvec",
  encodings: ["F32:F32", "Q8_0:F32", "Q4_K:F32", "Q5_K:F32", "Q6_K:F32"],
  params: { rows: { type: "integer", minimum: 1 }, cols: { type: "integer", minimum: 1, description: "a whole number of the type's blocks" } },
  bound: "dot(K)",
  edges: (encoding) => {
    const block = DTYPES[encoding.input].blockElements;
    // K at one block and just above it, at the 64…512 values where per-block partial sums still dominate, and large.
    const cols = [...new Set([block, 2 * block, 3 * block, ...[64, 128, 256, 512].filter((k) => k % block === 0 && k > 3 * block), 4096])];
    return { base: { rows: 16, cols: 4 * block }, axes: { cols: valueEdges("cols", cols), rows: valueEdges("rows", [1, 7, 33, 256]) } };
  },
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
