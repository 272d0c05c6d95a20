import { SeededRandom } from "../../harness/fixtures/seeded-random.js";
import { DTYPES, decodeValues, encodeValues, sentinelFilled } from "./tensor.js";
import { inputTensor, movedBytes, type KernelOp, valueEdges } from "./op.js";

/** Decode `values` values of a block type to float32, bit-exact to ggml's dequantize_row_*. */
export const dequantize: KernelOp<"dequantize"> = {
  name: "dequantize",
  encodings: ["Q8_0:F32", "Q4_K:F32", "Q5_K:F32", "Q6_K:F32"],
  params: { values: { type: "integer", minimum: 1, description: "a whole number of the type's blocks" } },
  bound: "bit-exact",
  edges: (encoding) => {
    const block = DTYPES[encoding.input].blockElements;
    return { base: { values: 4 * block }, axes: { values: valueEdges("values", [block, 2 * block, 64 * block]) } };
  },
  native: "quantized.c",
  build(params, encoding, seed) {
    const values = params.values as number;
    const x = encodeValues(encoding.input, new SeededRandom(seed).normalArray(values, 1));
    return { op: "dequantize", encoding: `${encoding.input}:${encoding.output}`, inputs: [{ name: "x", dtype: encoding.input, shape: [values], data: x }], outputs: [sentinelFilled("y", "F32", [values])], attrs: {} };
  },
  reference(problem) {
    const x = inputTensor(problem, "x");
    const y = decodeValues(x.dtype, x.data);
    return [{ kind: "exact", data: new Uint8Array(y.buffer) }];
  },
  counts: (problem) => ({ bytes: movedBytes(problem), flops: problem.outputs[0].shape[0] }),
};
