import { SeededRandom } from "../../harness/fixtures/seeded-random.js";
import { FLOAT32_SUBNORMAL_STEP as STEP, gamma, LIBM_ULPS } from "../envelopes.js";
import { float32Tensor, sentinelFilled } from "./tensor.js";
import { inputTensor, inputValues, movedBytes, SECOND_ORDER, type KernelOp, valueEdges, edge } from "./op.js";

/**
 * One token of Mamba-2's selective state space scan (llama.cpp ssm_scan with a scalar A per
 * head): head h reads group ⌊h/(H/G)⌋; dt⁺ = softplus(dt) (dt itself above 20);
 * state_out[h,p,n] = state_in[h,p,n]·e^(dt⁺·A_h) + B[g,n]·(x[h,p]·dt⁺); y[h,p] = Σ_n state_out[h,p,n]·C[g,n].
 */
export const ssdDecode: KernelOp<"ssd_decode"> = {
  name: "ssd_decode",
  encodings: ["F32:F32"],
  params: {
    H: { type: "integer", minimum: 1, description: "heads" },
    P: { type: "integer", minimum: 1, description: "head dim" },
    N: { type: "integer", minimum: 1, description: "state size" },
    G: { type: "integer", minimum: 1, description: "B/C groups (H a multiple of it)" },
  },
  optional: { dt_std: 2 },
  check: (params) => ((params.H as number) % (params.G as number) !== 0 ? "H must be a multiple of G" : undefined),
  bound: "ssd",
  edges: () => ({
    base: { H: 4, P: 16, N: 32, G: 2 },
    axes: {
      groups: [edge("one group", { G: 1 }), edge("a group per head", { G: 4 }), edge("3 heads per group", { H: 6, G: 2 })],
      N: valueEdges("N", [1, 128]),
      P: valueEdges("P", [1, 33]),
      // dt above 20 takes softplus's identity branch, and e^(dt⁺·A) underflows.
      dt_std: valueEdges("dt_std", [40]),
    },
  }),
  native: "recurrent.c",
  build(params, encoding, seed) {
    const [H, P, N, G] = ["H", "P", "N", "G"].map((name) => params[name] as number);
    const random = new SeededRandom(seed);
    return {
      op: "ssd_decode", encoding: `${encoding.input}:${encoding.output}`,
      inputs: [
        float32Tensor("x", [H, P], random.normalArray(H * P, 1)),
        float32Tensor("dt", [H], random.normalArray(H, (params.dt_std as number | undefined) ?? 2)),
        // A = −e^(A_log) < 0, as Mamba-2 stores it.
        float32Tensor("A", [H], Float32Array.from({ length: H }, () => -Math.exp(random.normal(1)))),
        float32Tensor("B", [G, N], random.normalArray(G * N, 1)),
        float32Tensor("C", [G, N], random.normalArray(G * N, 1)),
        float32Tensor("state_in", [H, P, N], random.normalArray(H * P * N, 0.5)),
      ],
      outputs: [sentinelFilled("y", "F32", [H, P]), sentinelFilled("state_out", "F32", [H, P, N])], attrs: {},
    };
  },
  reference(problem, { u }) {
    const [H, P] = inputTensor(problem, "x").shape;
    const [G, N] = inputTensor(problem, "B").shape;
    const [x, dt, A, B, C, state] = ["x", "dt", "A", "B", "C", "state_in"].map((name) => inputValues(problem, name));
    const y = new Float64Array(H * P);
    const yBound = new Float64Array(H * P);
    const next = new Float64Array(H * P * N);
    const nextBound = new Float64Array(H * P * N);
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / (H / G));
      const soft = dt[h] > 20 ? dt[h] : Math.log(1 + Math.exp(dt[h]));
      // exp (one libm call) and 1 + e (u) make a 3u relative error that log turns absolute, plus log's own.
      const softError = dt[h] > 20 ? 0 : (LIBM_ULPS + 1) * u + LIBM_ULPS * u * soft;
      const decay = Math.exp(soft * A[h]);
      const decayError = Math.abs(A[h]) * softError + u * Math.abs(soft * A[h]) + LIBM_ULPS * u;
      for (let p = 0; p < P; p++) {
        const xdt = x[h * P + p] * soft;
        const xdtError = Math.abs(x[h * P + p]) * softError + u * Math.abs(xdt);
        let sum = 0;
        let carried = 0;
        let absolute = 0;
        for (let n = 0; n < N; n++) {
          const at = (h * P + p) * N + n;
          const kept = state[at] * decay;
          const added = B[g * N + n] * xdt;
          const s = kept + added;
          next[at] = s;
          // Underflow: e^(dt⁺·A) (one step, times |state|) and the three products (half a step each, x·dt⁺'s times |B|).
          nextBound[at] = (Math.abs(kept) * (decayError + u) + Math.abs(B[g * N + n]) * xdtError + u * Math.abs(added) + u * Math.abs(s) + STEP * (Math.abs(state[at]) + 1 + Math.abs(B[g * N + n]) / 2)) * SECOND_ORDER;
          sum += s * C[g * N + n];
          carried += Math.abs(C[g * N + n]) * nextBound[at];
          absolute += Math.abs(s * C[g * N + n]);
        }
        y[h * P + p] = sum;
        yBound[h * P + p] = (carried + gamma(N, u) * absolute + (STEP / 2) * N) * SECOND_ORDER;
      }
    }
    return [{ kind: "bounded", value: y, bound: yBound }, { kind: "bounded", value: next, bound: nextBound }];
  },
  counts: (problem) => {
    const [H, P] = inputTensor(problem, "x").shape;
    const N = inputTensor(problem, "B").shape[1];
    return { bytes: movedBytes(problem), flops: 6 * H * P * N };
  },
};
