import { SeededRandom } from "../../harness/fixtures/seeded-random.js";
import { gamma, LIBM_ULPS } from "../envelopes.js";
import { float32Tensor, sentinelFilled } from "./tensor.js";
import { inputTensor, inputValues, movedBytes, SECOND_ORDER, type KernelOp } from "./op.js";

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

/**
 * One token of the gated delta rule (llama.cpp gated_delta_net, scalar gate): per value head h,
 * with q/k head h mod Hk and the state stored transposed (state[h, j, i] = S[i][j]):
 * S ← e^g·S; δ_j = (v_j − Σ_i S[i][j]·k_i)·β; S[i][j] += k_i·δ_j; o_j = (1/√S)·Σ_i S[i][j]·q_i.
 */
export const gdnDecode: KernelOp<"gdn_decode"> = {
  name: "gdn_decode",
  encodings: ["F32:F32"],
  params: {
    H: { type: "integer", minimum: 1, description: "value heads" },
    Hk: { type: "integer", minimum: 1, description: "q/k heads (H a multiple of it)" },
    S: { type: "integer", minimum: 1, description: "head dim (state is S × S per head)" },
  },
  check: (params) => ((params.H as number) % (params.Hk as number) !== 0 ? "H must be a multiple of Hk" : undefined),
  bound: "gdn",
  native: "recurrent.c",
  build(params, encoding, seed) {
    const [H, Hk, S] = ["H", "Hk", "S"].map((name) => params[name] as number);
    const random = new SeededRandom(seed);
    return {
      op: "gdn_decode", encoding: `${encoding.input}:${encoding.output}`,
      inputs: [
        float32Tensor("q", [Hk, S], unitRows(random, Hk, S)),
        float32Tensor("k", [Hk, S], unitRows(random, Hk, S)),
        float32Tensor("v", [H, S], random.normalArray(H * S, 1)),
        // log-decay in (−2, 0) and β in (0, 1), as the models produce them (−softplus, sigmoid).
        float32Tensor("g", [H], Float32Array.from({ length: H }, () => -2 * random.uniform())),
        float32Tensor("beta", [H], Float32Array.from({ length: H }, () => random.uniform())),
        float32Tensor("state_in", [H, S, S], random.normalArray(H * S * S, 0.5)),
      ],
      outputs: [sentinelFilled("o", "F32", [H, S]), sentinelFilled("state_out", "F32", [H, S, S])], attrs: {},
    };
  },
  reference(problem, { u }) {
    const [H, S] = inputTensor(problem, "v").shape;
    const Hk = inputTensor(problem, "q").shape[0];
    const [q, k, v, g, beta, state] = ["q", "k", "v", "g", "beta", "state_in"].map((name) => inputValues(problem, name));
    const scale = 1 / Math.sqrt(S);
    const o = new Float64Array(H * S);
    const oBound = new Float64Array(H * S);
    const next = new Float64Array(H * S * S);
    const nextBound = new Float64Array(H * S * S);
    const gammaS = gamma(S, u);
    for (let h = 0; h < H; h++) {
      const qk = (h % Hk) * S;
      const decay = Math.exp(g[h]);
      const at = (j: number, i: number) => (h * S + j) * S + i;
      const decayed = (j: number, i: number) => decay * state[at(j, i)];
      for (let j = 0; j < S; j++) {
        // Σ_i S'[i][j]·k_i with S' = e^g·S carrying one libm call and a product (3u relative).
        let kd = 0;
        let kdError = 0;
        for (let i = 0; i < S; i++) {
          const term = decayed(j, i) * k[qk + i];
          kd += term;
          kdError += Math.abs(term) * ((LIBM_ULPS + 1) * u + gammaS);
        }
        const delta = (v[h * S + j] - kd) * beta[h];
        const deltaError = Math.abs(beta[h]) * (kdError + u * Math.abs(v[h * S + j] - kd)) + u * Math.abs(delta);
        for (let i = 0; i < S; i++) {
          const s1 = decayed(j, i);
          const s2 = s1 + k[qk + i] * delta;
          next[at(j, i)] = s2;
          nextBound[at(j, i)] = ((LIBM_ULPS + 1) * u * Math.abs(s1) + Math.abs(k[qk + i]) * deltaError + u * Math.abs(k[qk + i] * delta) + u * Math.abs(s2)) * SECOND_ORDER;
        }
      }
      for (let j = 0; j < S; j++) {
        let sum = 0;
        let carried = 0;
        let absolute = 0;
        for (let i = 0; i < S; i++) {
          sum += next[at(j, i)] * q[qk + i];
          carried += Math.abs(q[qk + i]) * nextBound[at(j, i)];
          absolute += Math.abs(next[at(j, i)] * q[qk + i]);
        }
        o[h * S + j] = scale * sum;
        // 1/√S in float32 (2u) and its product (u).
        oBound[h * S + j] = (scale * (carried + gammaS * absolute) + 3 * u * Math.abs(scale * sum)) * SECOND_ORDER;
      }
    }
    return [{ kind: "bounded", value: o, bound: oBound }, { kind: "bounded", value: next, bound: nextBound }];
  },
  counts: (problem) => {
    const [H, S] = inputTensor(problem, "v").shape;
    return { bytes: movedBytes(problem), flops: 7 * H * S * S };
  },
};
