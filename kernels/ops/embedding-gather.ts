import { SeededRandom } from "../../harness/fixtures/seeded-random.js";
import { DTYPES, decodeValues, encodeValues, int32Tensor, sentinelFilled, tensorBytes } from "./tensor.js";
import { inputIds, inputTensor, type KernelOp, valueEdges } from "./op.js";

/** y[t] = decode(table[ids[t]]): ggml get_rows from a float or block-quantized table, bit-exact. */
export const embeddingGather: KernelOp<"embedding_gather"> = {
  name: "embedding_gather",
  encodings: ["F32:F32", "F16:F32", "BF16:F32", "Q8_0:F32", "Q4_K:F32", "Q5_K:F32", "Q6_K:F32"],
  params: {
    V: { type: "integer", minimum: 1, description: "table rows (vocabulary)" },
    D: { type: "integer", minimum: 1, description: "row length: whole blocks of the table type" },
    T: { type: "integer", minimum: 1, description: "ids gathered" },
  },
  bound: "bit-exact",
  edges: (encoding) => {
    const block = DTYPES[encoding.input].blockElements;
    return { base: { V: 64, D: 2 * block, T: 8 }, axes: { D: valueEdges("D", [...new Set([block, 3 * block])]), V: valueEdges("V", [1, 2]), T: valueEdges("T", [1, 300]) } };
  },
  native: "gather.c",
  build(params, encoding, seed) {
    const [V, D, T] = ["V", "D", "T"].map((name) => params[name] as number);
    const random = new SeededRandom(seed);
    const table = encodeValues(encoding.input, random.normalArray(V * D, 1));
    // Repeats and both ends of the table: an off-by-one row or a clipped last row shows.
    const ids = Int32Array.from({ length: T }, (_, t) => (t === 0 ? V - 1 : t === 1 ? 0 : Math.floor(random.uniform() * V)));
    return {
      op: "embedding_gather", encoding: `${encoding.input}:${encoding.output}`,
      inputs: [{ name: "table", dtype: encoding.input, shape: [V, D], data: table }, int32Tensor("ids", [T], ids)],
      outputs: [sentinelFilled("y", "F32", [T, D])], attrs: {},
    };
  },
  reference(problem) {
    const table = inputTensor(problem, "table");
    const D = table.shape[1];
    const rowBytes = tensorBytes(table.dtype, [D]);
    const ids = inputIds(problem, "ids");
    const y = new Float32Array(ids.length * D);
    ids.forEach((id, t) => y.set(decodeValues(table.dtype, table.data.subarray(id * rowBytes, (id + 1) * rowBytes)), t * D));
    return [{ kind: "exact", data: new Uint8Array(y.buffer) }];
  },
  counts(problem) {
    const table = inputTensor(problem, "table");
    const T = inputTensor(problem, "ids").shape[0];
    return { bytes: T * tensorBytes(table.dtype, [table.shape[1]]) + 4 * T + problem.outputs[0].data.byteLength, flops: 0 };
  },
};
