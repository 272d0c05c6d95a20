import { SeededRandom } from "../fixtures/seeded-random.js";

/** Standard normal by Box–Muller from the seeded generator. */
function normal(random: SeededRandom): number {
  const u = Math.max(random.uniform(), Number.EPSILON);
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random.uniform());
}

/** Gamma(shape, 1) by Marsaglia–Tsang (with the u^(1/shape) boost below shape 1). */
function gamma(shape: number, random: SeededRandom): number {
  if (shape < 1) return gamma(shape + 1, random) * Math.pow(Math.max(random.uniform(), Number.EPSILON), 1 / shape);
  const d = shape - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    const x = normal(random);
    const v = (1 + c * x) ** 3;
    if (v <= 0) continue;
    if (Math.log(Math.max(random.uniform(), Number.EPSILON)) < 0.5 * x * x + d - d * v + d * Math.log(v)) return d * v;
  }
}

/**
 * Open-loop arrival offsets in seconds for `count` requests at `rate` per second. Gaps are gamma
 * with shape = burstiness and mean 1/rate (vLLM's convention): burstiness 1 is a Poisson process,
 * below 1 burstier, above 1 more regular. Seeded: the same seed gives the same schedule.
 */
export function arrivalOffsets(count: number, rate: number, burstiness: number, seed: number): number[] {
  const random = new SeededRandom(seed);
  const offsets: number[] = [];
  let t = 0;
  for (let i = 0; i < count; i++) {
    offsets.push(t);
    t += gamma(burstiness, random) / (burstiness * rate);
  }
  return offsets;
}
