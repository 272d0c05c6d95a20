import { SeededRandom } from "../../harness/fixtures/seeded-random.js";
import { gamma, storedBound } from "../envelopes.js";
import { encodeValues, float32Tensor, sentinelFilled, type OutputDtype } from "./tensor.js";
import { inputTensor, inputValues, SECOND_ORDER, type KernelOp, type KernelProblem } from "./op.js";
import { boundedSoftmax } from "./softmax-bound.js";

/** Cache slots one query at `pos` attends: causal, and within the sliding window when there is one (llama.cpp is_masked_swa, standard). */
export function attendedSlots(length: number, pos: number, window: number): number[] {
  const slots: number[] = [];
  for (let j = 0; j < length; j++) if (j <= pos && (window === 0 || pos - j < window)) slots.push(j);
  return slots;
}

function shapes(problem: KernelProblem) {
  const [H, Dk] = inputTensor(problem, "q").shape;
  const [Hkv, L] = inputTensor(problem, "k").shape;
  const Dv = inputTensor(problem, "v").shape[2];
  return { H, Dk, Hkv, L, Dv, slots: attendedSlots(L, problem.attrs.pos as number, problem.attrs.window as number) };
}

/**
 * One decode step of scaled-dot-product attention over a KV cache: o_h = Σ_j p_j v_j with
 * p = softmax(scale · q_h·k_j) over the attended slots; head h reads kv head ⌊h/(H/Hkv)⌋.
 */
export const sdpaDecode: KernelOp<"sdpa_decode"> = {
  name: "sdpa_decode",
  encodings: ["F32:F32", "F32:BF16", "F16:F32"],
  params: {
    H: { type: "integer", minimum: 1, description: "query heads" },
    Hkv: { type: "integer", minimum: 1, description: "kv heads (H a multiple of it: GQA)" },
    L: { type: "integer", minimum: 1, description: "cache slots" },
    Dk: { type: "integer", minimum: 1 },
    Dv: { type: "integer", minimum: 1 },
    pos: { type: "integer", minimum: 0, description: "the query's position (< L); slots after it are masked" },
    window: { type: "integer", minimum: 0, description: "sliding window (0: none): slot j is attended iff pos − j < window" },
  },
  optional: { scale: 0 },
  check: (params) => ((params.H as number) % (params.Hkv as number) !== 0 ? "H must be a multiple of Hkv" : (params.pos as number) >= (params.L as number) ? "pos must be below L" : undefined),
  bound: "sdpa",
  native: "attention.c",
  build(params, encoding, seed) {
    const [H, Hkv, L, Dk, Dv] = ["H", "Hkv", "L", "Dk", "Dv"].map((name) => params[name] as number);
    const random = new SeededRandom(seed);
    const scale = (params.scale as number | undefined) || 1 / Math.sqrt(Dk);
    return {
      op: "sdpa_decode", encoding: `${encoding.input}:${encoding.output}`,
      inputs: [
        float32Tensor("q", [H, Dk], random.normalArray(H * Dk, 1)),
        { name: "k", dtype: encoding.input, shape: [Hkv, L, Dk], data: encodeValues(encoding.input, random.normalArray(Hkv * L * Dk, 1)) },
        { name: "v", dtype: encoding.input, shape: [Hkv, L, Dv], data: encodeValues(encoding.input, random.normalArray(Hkv * L * Dv, 1)) },
      ],
      outputs: [sentinelFilled("o", encoding.output, [H, Dv])],
      attrs: { scale, pos: params.pos, window: params.window },
    };
  },
  reference(problem, { u }) {
    const { H, Dk, Hkv, L, Dv, slots } = shapes(problem);
    const q = inputValues(problem, "q");
    const k = inputValues(problem, "k");
    const v = inputValues(problem, "v");
    const scale = Math.fround(problem.attrs.scale as number);
    const n = slots.length;
    const value = new Float64Array(H * Dv);
    const bound = new Float64Array(H * Dv);
    for (let h = 0; h < H; h++) {
      const kv = Math.floor(h / (H / Hkv));
      const dots = new Float64Array(n);
      const dotErrors = new Float64Array(n);
      slots.forEach((j, s) => {
        let sum = 0;
        let absolute = 0;
        for (let d = 0; d < Dk; d++) {
          const term = q[h * Dk + d] * k[(kv * L + j) * Dk + d];
          sum += term;
          absolute += Math.abs(term);
        }
        dots[s] = sum;
        // The dot (γ_Dk) and the product by scale (u): γ_{Dk+1}·|scale|·Σ|q·k|.
        dotErrors[s] = gamma(Dk + 1, u) * Math.abs(scale) * absolute;
      });
      const soft = boundedSoftmax(dots, scale, u, dotErrors);
      for (let d = 0; d < Dv; d++) {
        let numerator = 0;
        let spread = 0;
        slots.forEach((j, s) => {
          const term = soft.e[s] * v[(kv * L + j) * Dv + d];
          numerator += term;
          // Each weight's error, the accumulation (γ_n), and normalising before or after the sum.
          spread += Math.abs(term) * (soft.termError[s] + gamma(n, u) + soft.sumError + u);
        });
        const o = numerator / soft.sum;
        value[h * Dv + d] = o;
        bound[h * Dv + d] = storedBound((spread / soft.sum + Math.abs(o) * (soft.sumError + u)) * SECOND_ORDER, o, problem.outputs[0].dtype as OutputDtype);
      }
    }
    return [{ kind: "bounded", value, bound }];
  },
  counts(problem) {
    const { H, Dk, Hkv, Dv, slots } = shapes(problem);
    const kvBytes = (name: string, d: number) => (inputTensor(problem, name).data.byteLength / (inputTensor(problem, name).shape[1] * Hkv * d)) * d * Hkv * slots.length;
    return {
      bytes: inputTensor(problem, "q").data.byteLength + kvBytes("k", Dk) + kvBytes("v", Dv) + problem.outputs[0].data.byteLength,
      flops: H * slots.length * (2 * Dk + 2 * Dv + 3),
    };
  },
};
