/**
 * npm run bench:sampler — a sampled token's draw on a vocabulary-sized row, in native code (the
 * addon's sampleRow, what the server runs) against the JavaScript fallback (sampleTokenInJs), side
 * by side in one process, alternating, best of 2 passes of DRAWS draws each. The row is synthetic:
 * logits spread over ±3 with one entry in a thousand lifted by 8, so that top_p keeps a nucleus of
 * some hundreds of tokens. BENCH_VOCAB=N,N picks the row sizes (default the Qwen3 and Gemma 3
 * vocabularies), BENCH_DRAWS the draws per pass (default 60).
 */
import { loadavg } from "node:os";
import { describeMachine, machineInfo } from "../harness/results/machine.js";
import { sampleToken, sampleTokenInJs, SamplingRandom, type SamplingParams } from "../server/sampling.js";
import type { LogitsRow } from "../server/logits-row.js";

const SIZES = (process.env.BENCH_VOCAB ?? "151936,262144").split(",").map(Number);
const DRAWS = Number(process.env.BENCH_DRAWS ?? 60);
const SETTINGS: readonly [string, SamplingParams][] = [
  ["temperature 0.7, top_p 0.95", { temperature: 0.7, topP: 0.95, topK: 0, minP: 0 }],
  ["temperature 0.7", { temperature: 0.7, topP: 1, topK: 0, minP: 0 }],
  ["temperature 0.7, top_k 40", { temperature: 0.7, topP: 1, topK: 40, minP: 0 }],
];

function syntheticRow(size: number): Float32Array {
  const row = new Float32Array(size);
  let state = 1;
  const next = () => (state = (state * 16807) % 2147483647) / 2147483647;
  for (let i = 0; i < size; i++) row[i] = (next() * 2 - 1) * 3 + (next() < 0.001 ? 8 : 0);
  return row;
}

function msPerDraw(draw: typeof sampleToken, row: LogitsRow, params: SamplingParams): number {
  const random = new SamplingRandom(42);
  for (let i = 0; i < 5; i++) draw(row, params, random);
  const start = performance.now();
  for (let i = 0; i < DRAWS; i++) draw(row, params, random);
  return (performance.now() - start) / DRAWS;
}

console.log(`machine: ${describeMachine(machineInfo())}, load average ${loadavg().map((l) => l.toFixed(1)).join(" ")}; ms a draw, best of 2 passes of ${DRAWS}`);
for (const size of SIZES) {
  const row = syntheticRow(size);
  for (const [name, params] of SETTINGS) {
    const best = { js: Infinity, native: Infinity };
    for (let pass = 0; pass < 2; pass++) {
      best.js = Math.min(best.js, msPerDraw(sampleTokenInJs, row, params));
      best.native = Math.min(best.native, msPerDraw(sampleToken, row, params));
    }
    console.log(`  ${size} entries, ${name}: JavaScript ${best.js.toFixed(2)}, native ${best.native.toFixed(2)} — ×${(best.js / best.native).toFixed(1)}`);
  }
}
