import { SeededRandom } from "../../harness/fixtures/seeded-random.js";
import { FLOAT32_SUBNORMAL_STEP, gamma, LIBM_ULPS, storedBound } from "../envelopes.js";
import { encodeValues, float32Tensor, sentinelFilled, type OutputDtype } from "./tensor.js";
import { inputTensor, inputValues, SECOND_ORDER, type KernelOp, type KernelProblem, valueEdges, edge } from "./op.js";
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

/** The eps of the in-kernel q/k RMSNorm (`qk_norm`), sent as `qk_norm_eps`. */
export const SDPA_QK_NORM_EPS = 1e-6;

/**
 * Rows of `x` ([rows, D]) RMS-normalised with weights `w` (`qk_norm` "w") or 1 + w ("1+w", as
 * Gemma and Qwen3-Next store them): x·(1/√(mean(x²) + eps))·w'.
 */
function rmsNormRows(x: ArrayLike<number>, D: number, w: ArrayLike<number>, onePlus: boolean): Float64Array {
  const y = new Float64Array(x.length);
  for (let r = 0; r < x.length / D; r++) {
    let sum = 0;
    for (let d = 0; d < D; d++) sum += x[r * D + d] ** 2;
    const scale = 1 / Math.sqrt(sum / D + SDPA_QK_NORM_EPS);
    for (let d = 0; d < D; d++) y[r * D + d] = x[r * D + d] * scale * (onePlus ? 1 + w[d] : w[d]);
  }
  return y;
}

/**
 * One decode step of scaled-dot-product attention over a KV cache: o_h = Σ_j p_j v_j with
 * p = softmax(scale · q_h·k_j) over the attended slots; head h reads kv head ⌊h/(H/Hkv)⌋.
 * Optional conventions (docs/kernel-ops.md, "sdpa_decode conventions"): q and every k row
 * RMS-normalised in the kernel (`qk_norm`), and an output gate o·σ(gate) (`output_gate`).
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
  optional: { scale: 0, qk_norm: "none", output_gate: false },
  check: (params) => ((params.H as number) % (params.Hkv as number) !== 0 ? "H must be a multiple of Hkv" : (params.pos as number) >= (params.L as number) ? "pos must be below L"
    : params.qk_norm !== undefined && !["none", "w", "1+w"].includes(params.qk_norm as string) ? "qk_norm must be none, w or 1+w" : undefined),
  bound: "sdpa",
  edges: () => ({
    base: { H: 4, Hkv: 2, L: 64, Dk: 64, Dv: 64, pos: 63, window: 0 },
    axes: {
      heads: [edge("no grouping", { H: 4, Hkv: 4 }), edge("one kv head", { H: 8, Hkv: 1 }), edge("3 per group", { H: 6, Hkv: 2 })],
      window: [...valueEdges("window", [1, 2, 63, 64, 100]), edge("window inside the cache", { pos: 40, window: 16 })],
      pos: [edge("first slot", { pos: 0 }), edge("one slot", { L: 1, pos: 0 }), edge("mid cache", { pos: 31 })],
      dims: [edge("Dk < Dv", { Dk: 32, Dv: 128 }), edge("Dk > Dv", { Dk: 128, Dv: 16 }), edge("Dk = Dv = 1", { Dk: 1, Dv: 1 })],
      // scale 5 at Dk = 64 is the usual 1/√Dk logit scale times 40.
      scale: valueEdges("scale", [5, 1e-3]),
      conventions: [
        ...valueEdges("qk_norm", ["w", "1+w"]), edge("output gate", { output_gate: true }),
        edge("q/k RMSNorm 1+w and output gate, Dk ≠ Dv", { qk_norm: "1+w", output_gate: true, Dk: 32, Dv: 64 }),
      ],
    },
  }),
  native: "attention.c",
  build(params, encoding, seed) {
    const [H, Hkv, L, Dk, Dv] = ["H", "Hkv", "L", "Dk", "Dv"].map((name) => params[name] as number);
    const random = new SeededRandom(seed);
    const scale = (params.scale as number | undefined) || 1 / Math.sqrt(Dk);
    const qkNorm = (params.qk_norm as string | undefined) ?? "none";
    const inputs = [
      float32Tensor("q", [H, Dk], random.normalArray(H * Dk, 1)),
      { name: "k", dtype: encoding.input, shape: [Hkv, L, Dk], data: encodeValues(encoding.input, random.normalArray(Hkv * L * Dk, 1)) },
      { name: "v", dtype: encoding.input, shape: [Hkv, L, Dv], data: encodeValues(encoding.input, random.normalArray(Hkv * L * Dv, 1)) },
    ];
    // Norm weights near 1 as stored plainly, near 0 as stored for 1 + w; gate logits wide enough to reach both tails of σ.
    const weights = () => Float32Array.from(random.normalArray(Dk, 0.2), (w) => (qkNorm === "w" ? 1 + w : w));
    if (qkNorm !== "none") inputs.push(float32Tensor("q_norm", [Dk], weights()), float32Tensor("k_norm", [Dk], weights()));
    if (params.output_gate === true) inputs.push(float32Tensor("gate", [H, Dv], random.normalArray(H * Dv, 2)));
    return {
      op: "sdpa_decode", encoding: `${encoding.input}:${encoding.output}`, inputs,
      outputs: [sentinelFilled("o", encoding.output, [H, Dv])],
      // The conventions only when the case sets them, so a case without them reaches plugins that know none.
      attrs: {
        scale, pos: params.pos, window: params.window,
        ...(qkNorm === "none" ? {} : { qk_norm: qkNorm, qk_norm_eps: SDPA_QK_NORM_EPS }),
        ...(params.output_gate === undefined ? {} : { output_gate: params.output_gate }),
      },
    };
  },
  reference(problem, { u }) {
    const { H, Dk, Hkv, L, Dv, slots } = shapes(problem);
    const qkNorm = (problem.attrs.qk_norm as string | undefined) ?? "none";
    const normed = (name: string) => (qkNorm === "none" ? inputValues(problem, name) : rmsNormRows(inputValues(problem, name), Dk, inputValues(problem, `${name}_norm`), qkNorm === "1+w"));
    const q = normed("q");
    const k = normed("k");
    // The rms_norm bound's relative error per normalised value (γ_{Dk+1}/2 + 5u), and u more for forming 1 + w.
    const normError = qkNorm === "none" ? 0 : gamma(Dk + 1, u) / 2 + 5 * u + (qkNorm === "1+w" ? u : 0);
    const gate = problem.attrs.output_gate === true ? inputValues(problem, "gate") : undefined;
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
        // The dot (γ_Dk) and the product by scale (u): γ_{Dk+1}·|scale|·Σ|q·k|, plus q's and k's norm errors.
        dotErrors[s] = (gamma(Dk + 1, u) + 2 * normError) * Math.abs(scale) * absolute;
      });
      const soft = boundedSoftmax(dots, scale, u, dotErrors);
      for (let d = 0; d < Dv; d++) {
        let numerator = 0;
        let spread = 0;
        let vAbsolute = 0;
        slots.forEach((j, s) => {
          const term = soft.e[s] * v[(kv * L + j) * Dv + d];
          numerator += term;
          // Each weight's error, the accumulation (γ_n), and normalising before or after the sum.
          spread += Math.abs(term) * (soft.termError[s] + gamma(n, u) + soft.sumError + u);
          vAbsolute += Math.abs(v[(kv * L + j) * Dv + d]);
        });
        const o = numerator / soft.sum;
        // Underflow: each weight's absolute error (over Σ ≥ 1) times |v|, and half a subnormal step
        // for each quotient and product that may land below float32's normals (n + 1 of them, plus n |v|-scaled).
        const underflow = (soft.termAbsolute / soft.sum) * vAbsolute + (FLOAT32_SUBNORMAL_STEP / 2) * (vAbsolute + n + 1);
        let computed = spread / soft.sum + Math.abs(o) * (soft.sumError + u) + underflow;
        let out = o;
        if (gate !== undefined) {
          // o·σ(g): σ = 1/(1 + e^{−g}) carries L + 2u, the product u (and half a step of underflow).
          const sigma = 1 / (1 + Math.exp(-gate[h * Dv + d]));
          out = o * sigma;
          computed = computed * sigma + Math.abs(out) * (LIBM_ULPS + 3) * u + FLOAT32_SUBNORMAL_STEP / 2;
        }
        value[h * Dv + d] = out;
        bound[h * Dv + d] = storedBound(computed * SECOND_ORDER, out, problem.outputs[0].dtype as OutputDtype);
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
