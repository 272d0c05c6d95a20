import { SeededRandom } from "../../harness/fixtures/seeded-random.js";
import { FLOAT32_SUBNORMAL_STEP as STEP, gamma, LIBM_ULPS } from "../envelopes.js";
import { float32Tensor, sentinelFilled } from "./tensor.js";
import { edge, inputTensor, inputValues, movedBytes, SECOND_ORDER, valueEdges, type KernelOp, type KernelProblem } from "./op.js";

/** Rows of unit L2 norm, as gated delta nets feed q and k (l2_norm before the recurrence). */
function unitRows(random: SeededRandom, rows: number, width: number): Float32Array {
  const x = random.normalArray(rows * width, 1);
  for (let r = 0; r < rows; r++) {
    let norm = 0;
    for (let i = 0; i < width; i++) norm += x[r * width + i] ** 2;
    for (let i = 0; i < width; i++) x[r * width + i] /= Math.sqrt(norm);
  }
  return x;
}

/** The eps of the in-kernel q/k L2 norm (`qk_l2_norm`): x / max(√Σx², eps), as the l2_norm op. */
export const GDN_L2_EPS = 1e-6;

/** Value head h's q/k head: `tiled` h mod Hk (llama.cpp), `grouped` ⌊h / (H/Hk)⌋ (vLLM, flash-linear-attention). */
export function gdnKeyHead(h: number, H: number, Hk: number, heads: string): number {
  return heads === "grouped" ? Math.floor(h / (H / Hk)) : h % Hk;
}

const softplus = (x: number) => (x > 20 ? x : Math.log(1 + Math.exp(x)));

interface Gates {
  readonly g: Float64Array;
  /** Absolute error bound of each computed g. */
  readonly gError: Float64Array;
  readonly beta: Float64Array;
  /** Relative error bound of each computed β. */
  readonly betaError: Float64Array;
}

/**
 * g and β per head: given (`direct`), or formed in the kernel from the raw projections (`raw`,
 * Qwen3-Next / flash-linear-attention): g = −e^{A_log}·softplus(a + dt_bias), β = σ(b).
 */
function gates(problem: KernelProblem, H: number, u: number): Gates {
  const L = LIBM_ULPS * u;
  if (problem.attrs.gating !== "raw") {
    const [g, beta] = ["g", "beta"].map((name) => Float64Array.from(inputValues(problem, name)));
    return { g, gError: new Float64Array(H), beta, betaError: new Float64Array(H) };
  }
  const [a, b, aLog, dtBias] = ["a", "b", "A_log", "dt_bias"].map((name) => inputValues(problem, name));
  const out: Gates = { g: new Float64Array(H), gError: new Float64Array(H), beta: new Float64Array(H), betaError: new Float64Array(H) };
  for (let h = 0; h < H; h++) {
    const x = a[h] + dtBias[h];
    const sp = softplus(x);
    // The sum (u|x|, times softplus' slope σ ≤ 1), exp (L) and 1 + e (u) turned absolute by log, and log's own L.
    const spError = u * Math.abs(x) + (x > 20 ? u * Math.abs(sp) : L + u + L * sp);
    const rate = Math.exp(aLog[h]);
    out.g[h] = -rate * sp;
    // e^{A_log} (L) and the product (u) relative, and softplus' error times e^{A_log}.
    out.gError[h] = Math.abs(out.g[h]) * (L + u) + rate * spError;
    out.beta[h] = 1 / (1 + Math.exp(-b[h]));
    out.betaError[h] = L + 2 * u;
  }
  return out;
}

/** q or k rows as the kernel uses them: as given, or L2-normalised in the kernel (then with the l2_norm op's relative error). */
function keyRows(problem: KernelProblem, name: string, Dk: number, u: number): { rows: Float64Array; error: number } {
  const x = inputValues(problem, name);
  if (problem.attrs.qk_l2_norm !== true) return { rows: Float64Array.from(x), error: 0 };
  const rows = new Float64Array(x.length);
  for (let r = 0; r < x.length / Dk; r++) {
    let sum = 0;
    for (let i = 0; i < Dk; i++) sum += x[r * Dk + i] ** 2;
    const norm = Math.max(Math.sqrt(sum), GDN_L2_EPS);
    for (let i = 0; i < Dk; i++) rows[r * Dk + i] = x[r * Dk + i] / norm;
  }
  return { rows, error: gamma(Dk + 1, u) / 2 + 3 * u };
}

function shapes(problem: KernelProblem) {
  const [H, Dv] = inputTensor(problem, "v").shape;
  const [Hk, Dk] = inputTensor(problem, "q").shape;
  return { H, Dv, Hk, Dk };
}

/**
 * One token of the gated delta rule (llama.cpp gated_delta_net, scalar gate), with the conventions
 * other engines use as attributes (docs/kernel-ops.md): per value head h, q/k head by `heads`, the
 * state stored transposed (state[h, j, i] = S[i][j], i < Dk, j < Dv):
 * S ← e^g·S; δ_j = (v_j − Σ_i S[i][j]·k_i)·β; S[i][j] += k_i·δ_j; o_j = scale·Σ_i S[i][j]·q_i.
 */
export const gdnDecode: KernelOp<"gdn_decode"> = {
  name: "gdn_decode",
  encodings: ["F32:F32"],
  params: {
    H: { type: "integer", minimum: 1, description: "value heads" },
    Hk: { type: "integer", minimum: 1, description: "q/k heads (H a multiple of it)" },
    S: { type: "integer", minimum: 1, description: "key head dim Dk (and the value head dim unless Dv is given)" },
  },
  // Dv 0: Dv = S; scale 0: 1/√Dk; decay: g drawn from (−decay, 0) when gating is direct.
  optional: { decay: 2, Dv: 0, scale: 0, heads: "tiled", qk_l2_norm: false, gating: "direct" },
  check: (params) => {
    if ((params.H as number) % (params.Hk as number) !== 0) return "H must be a multiple of Hk";
    if (params.heads !== undefined && params.heads !== "tiled" && params.heads !== "grouped") return "heads must be tiled or grouped";
    if (params.gating !== undefined && params.gating !== "direct" && params.gating !== "raw") return "gating must be direct or raw";
    return undefined;
  },
  bound: "gdn",
  edges: () => ({
    base: { H: 4, Hk: 2, S: 32 },
    axes: {
      heads: [edge("no grouping", { H: 4, Hk: 4 }), edge("one q/k head", { H: 8, Hk: 1 }), edge("grouped", { heads: "grouped" }), edge("grouped, 4 per q/k head", { H: 8, Hk: 2, heads: "grouped" })],
      S: valueEdges("S", [1, 17, 128]),
      dims: [edge("Dk < Dv", { S: 16, Dv: 32 }), edge("Dk > Dv", { S: 64, Dv: 8 })],
      // e^g underflows: the state is forgotten (e^−200 ≈ 1e-87).
      decay: valueEdges("decay", [200, 1e-3]),
      scale: valueEdges("scale", [1, 0.01]),
      conventions: [
        edge("in-kernel q/k L2 norm", { qk_l2_norm: true }),
        edge("gating from raw a, b", { gating: "raw" }),
        // The form other engines publish goldens for: Dk ≠ Dv, grouped heads, in-kernel norm and gating.
        edge("Dk 16, Dv 32, grouped, raw gating, L2 norm", { H: 8, Hk: 2, S: 16, Dv: 32, heads: "grouped", gating: "raw", qk_l2_norm: true }),
      ],
    },
  }),
  native: "recurrent.c",
  build(params, encoding, seed) {
    const [H, Hk, Dk] = ["H", "Hk", "S"].map((name) => params[name] as number);
    const Dv = (params.Dv as number | undefined) || Dk;
    const random = new SeededRandom(seed);
    const normalised = params.qk_l2_norm === true;
    const rows = () => (normalised ? random.normalArray(Hk * Dk, 1) : unitRows(random, Hk, Dk));
    const q = rows();
    const k = rows();
    const v = random.normalArray(H * Dv, 1);
    const perHead = (name: string, draw: () => number) => float32Tensor(name, [H], Float32Array.from({ length: H }, draw));
    const gating = params.gating === "raw"
      // Raw projections as Qwen3-Next's: a, b ~ N(0, 1), A_log ~ N(0, 0.5²), dt_bias ~ N(0, 0.5²).
      ? [perHead("a", () => random.normal(1)), perHead("b", () => random.normal(1)), perHead("A_log", () => random.normal(0.5)), perHead("dt_bias", () => random.normal(0.5))]
      // log-decay in (−decay, 0) (models: (−2, 0)) and β in (0, 1), as the models produce them (−softplus, sigmoid).
      : [perHead("g", () => -((params.decay as number | undefined) ?? 2) * random.uniform()), perHead("beta", () => random.uniform())];
    // Attributes: only the conventions the case sets, so a case without them reaches plugins that know none.
    const attrs = Object.fromEntries(["scale", "heads", "qk_l2_norm", "gating"].filter((name) => params[name] !== undefined && !(name === "scale" && params.scale === 0)).map((name) => [name, params[name]]));
    return {
      op: "gdn_decode", encoding: `${encoding.input}:${encoding.output}`,
      inputs: [float32Tensor("q", [Hk, Dk], q), float32Tensor("k", [Hk, Dk], k), float32Tensor("v", [H, Dv], v), ...gating, float32Tensor("state_in", [H, Dv, Dk], random.normalArray(H * Dv * Dk, 0.5))],
      outputs: [sentinelFilled("o", "F32", [H, Dv]), sentinelFilled("state_out", "F32", [H, Dv, Dk])], attrs,
    };
  },
  reference(problem, { u }) {
    const { H, Dv, Hk, Dk } = shapes(problem);
    const v = inputValues(problem, "v");
    const state = inputValues(problem, "state_in");
    const { rows: q, error: qError } = keyRows(problem, "q", Dk, u);
    const { rows: k, error: kError } = keyRows(problem, "k", Dk, u);
    const { g, gError, beta, betaError } = gates(problem, H, u);
    const scale = problem.attrs.scale === undefined ? 1 / Math.sqrt(Dk) : Math.fround(problem.attrs.scale as number);
    const heads = (problem.attrs.heads as string | undefined) ?? "tiled";
    const o = new Float64Array(H * Dv);
    const oBound = new Float64Array(H * Dv);
    const next = new Float64Array(H * Dv * Dk);
    const nextBound = new Float64Array(H * Dv * Dk);
    const gammaK = gamma(Dk, u);
    for (let h = 0; h < H; h++) {
      const qk = gdnKeyHead(h, H, Hk, heads) * Dk;
      const at = (j: number, i: number) => (h * Dv + j) * Dk + i;
      const decay = Math.exp(g[h]);
      const decayed = (j: number, i: number) => decay * state[at(j, i)];
      // e^g: one libm call and g's own error, then the product by S (u).
      const decayError = LIBM_ULPS * u + gError[h] + u;
      for (let j = 0; j < Dv; j++) {
        // Σ_i S'[i][j]·k_i with S' = e^g·S carrying decayError, k_i its norm's error, the sum γ_Dk.
        let kd = 0;
        let kdError = 0;
        for (let i = 0; i < Dk; i++) {
          const term = decayed(j, i) * k[qk + i];
          kd += term;
          // Underflow: e^g (one step, times |S|) and the two products (half a step each).
          kdError += Math.abs(term) * (decayError + kError + gammaK) + Math.abs(k[qk + i]) * STEP * (Math.abs(state[at(j, i)]) + 0.5) + STEP / 2;
        }
        const delta = (v[h * Dv + j] - kd) * beta[h];
        const deltaError = Math.abs(beta[h]) * (kdError + u * Math.abs(v[h * Dv + j] - kd)) + (u + betaError[h]) * Math.abs(delta) + STEP / 2;
        for (let i = 0; i < Dk; i++) {
          const s1 = decayed(j, i);
          const s2 = s1 + k[qk + i] * delta;
          next[at(j, i)] = s2;
          // Underflow: the decayed state's (one step times |S|, half for its product) and k·δ's half step.
          nextBound[at(j, i)] = (decayError * Math.abs(s1) + Math.abs(k[qk + i]) * deltaError + (u + kError) * Math.abs(k[qk + i] * delta) + u * Math.abs(s2) + STEP * (Math.abs(state[at(j, i)]) + 1)) * SECOND_ORDER;
        }
      }
      for (let j = 0; j < Dv; j++) {
        let sum = 0;
        let carried = 0;
        let absolute = 0;
        for (let i = 0; i < Dk; i++) {
          sum += next[at(j, i)] * q[qk + i];
          carried += Math.abs(q[qk + i]) * nextBound[at(j, i)];
          absolute += Math.abs(next[at(j, i)] * q[qk + i]);
        }
        o[h * Dv + j] = scale * sum;
        // The scale in float32 (1/√Dk: 2u; given: exact after its float32 rounding) and its product (u); q's norm error;
        // underflow: half a step for each of the Dk + 1 products.
        oBound[h * Dv + j] = (scale * (carried + (gammaK + qError) * absolute) + 3 * u * Math.abs(scale * sum) + (STEP / 2) * (scale * Dk + 1)) * SECOND_ORDER;
      }
    }
    return [{ kind: "bounded", value: o, bound: oBound }, { kind: "bounded", value: next, bound: nextBound }];
  },
  counts: (problem) => {
    const { H, Dv, Dk } = shapes(problem);
    return { bytes: movedBytes(problem), flops: 7 * H * Dv * Dk };
  },
};
