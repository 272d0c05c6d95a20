import { SeededRandom } from "../../harness/fixtures/seeded-random.js";
import { DTYPES, decodeValues, encodeValues, float32Tensor, int32Tensor, sentinelFilled, tensorBytes, type OutputDtype } from "./tensor.js";
import { inputIds, inputTensor, inputValues, type KernelOp, type KernelProblem, valueEdges, edge } from "./op.js";
import { boundedDots } from "./dot-products.js";

const TYPES = ["Q4_K", "Q5_K", "Q6_K", "Q8_0"] as const;

/** The experts rows of `ids` use, each once (a kernel reads only those towers). */
function usedExperts(problem: KernelProblem): number[] {
  return [...new Set(inputIds(problem, "ids"))].sort((a, b) => a - b);
}

/**
 * y[p, n] = Σ_k W[ids[p], n, k] · a[Pa = 1 ? 0 : p, k]: E expert towers of packed ggml blocks
 * ("bt": each output row n is a contiguous weight row of K values), P output rows each routed to
 * one expert, and either one broadcast activation row or one per output row (llama.cpp
 * mul_mat_id). E = 1 is a dense quantized matmul.
 */
export const matmulBtQuantGrouped: KernelOp<"matmul_bt_quant_grouped"> = {
  name: "matmul_bt_quant_grouped",
  encodings: TYPES.flatMap((t) => [`${t}:F32`, `${t}:BF16`]),
  params: {
    E: { type: "integer", minimum: 1, description: "expert towers" },
    P: { type: "integer", minimum: 1, description: "output rows" },
    Pa: { type: "integer", minimum: 1, description: "activation rows: 1 (broadcast) or P" },
    N: { type: "integer", minimum: 1, description: "outputs per row (weight rows per expert)" },
    K: { type: "integer", minimum: 1, description: "reduction length: whole blocks of the weight type" },
  },
  check(params, encoding) {
    if (params.Pa !== 1 && params.Pa !== params.P) return "Pa must be 1 (a broadcast activation row) or P";
    const block = DTYPES[encoding.input].blockElements;
    if ((params.K as number) % block !== 0) return `K must be a multiple of ${block} (one ${encoding.input} block)`;
    return undefined;
  },
  bound: "dot(K)",
  edges: (encoding) => {
    const block = DTYPES[encoding.input].blockElements;
    return {
      base: { E: 4, P: 3, Pa: 1, N: 16, K: 2 * block },
      axes: {
        K: valueEdges("K", [block, 3 * block, 16 * block]),
        N: valueEdges("N", [1, 33]),
        rows: [edge("one row", { P: 1, Pa: 1 }), edge("P activation rows", { P: 5, Pa: 5 })],
        E: valueEdges("E", [1, 16]),
      },
    };
  },
  native: "matmul.c",
  build(params, encoding, seed) {
    const [E, P, Pa, N, K] = ["E", "P", "Pa", "N", "K"].map((name) => params[name] as number);
    const random = new SeededRandom(seed);
    const ids = Int32Array.from({ length: P }, () => Math.floor(random.uniform() * E));
    // The last tower is always used: an off-by-one expert id then reads past the end or a wrong tower.
    ids[P - 1] = E - 1;
    const w = encodeValues(encoding.input, random.normalArray(E * N * K, 1 / Math.sqrt(K)));
    return {
      op: "matmul_bt_quant_grouped", encoding: `${encoding.input}:${encoding.output}`,
      inputs: [{ name: "w", dtype: encoding.input, shape: [E, N, K], data: w }, float32Tensor("a", [Pa, K], random.normalArray(Pa * K, 1)), int32Tensor("ids", [P], ids)],
      outputs: [sentinelFilled("y", encoding.output, [P, N])], attrs: {},
    };
  },
  reference(problem, { u }) {
    const weights = inputTensor(problem, "w");
    const [, N, K] = weights.shape;
    const [Pa] = inputTensor(problem, "a").shape;
    const ids = inputIds(problem, "ids");
    const towerBytes = tensorBytes(weights.dtype, [N, K]);
    const towers = new Map(usedExperts(problem).map((e) => [e, decodeValues(weights.dtype, weights.data.subarray(e * towerBytes, (e + 1) * towerBytes))]));
    const a = inputValues(problem, "a");
    const y = problem.outputs[0];
    const P = y.shape[0];
    return [{ kind: "bounded", ...boundedDots(P * N, K, (i) => {
      const p = Math.floor(i / N);
      return { w: towers.get(ids[p])!, wAt: (i % N) * K, x: a, xAt: Pa === 1 ? 0 : p * K };
    }, y.dtype as OutputDtype, u) }];
  },
  counts(problem) {
    const weights = inputTensor(problem, "w");
    const [, N, K] = weights.shape;
    const P = problem.outputs[0].shape[0];
    const rest = problem.inputs.filter((t) => t.name !== "w").reduce((sum, t) => sum + t.data.byteLength, 0) + problem.outputs[0].data.byteLength;
    return { bytes: usedExperts(problem).length * tensorBytes(weights.dtype, [N, K]) + rest, flops: 2 * P * N * K };
  },
};
