// test-tier: fast

/**
 * The native draw (native/llama-context/row_sampler.cc, the addon's sampleRow) against the
 * JavaScript one it replaces on the server's hot path (server/sampling.ts sampleTokenInJs): the same
 * token for the same row, settings and generator state, on rows built to reach every branch — ties
 * at the top and at the top-k and nucleus boundaries, NaN and -Infinity entries, probability-0
 * tokens, one-entry rows, a 152k vocabulary — so a seed draws the same text with or without the addon.
 */
import { test } from "uvu";
import * as assert from "uvu/assert";
import { SeededRandom } from "../harness/fixtures/seeded-random.js";
import { contextAccessAddon } from "../harness/sut/llamacpp-native-context.js";
import { negativeExp, sampleToken, sampleTokenInJs, SamplingRandom, type SamplingParams } from "../server/sampling.js";

const addon = contextAccessAddon();

test("this checkout's addon draws sampled tokens natively", () => {
  assert.type(addon, "object", typeof addon === "string" ? addon : "");
  assert.type(typeof addon === "string" ? undefined : addon.sampleRow, "function");
});

/** A row of `size` logits: spread values, some repeated exactly (ties), some NaN or -Infinity, in Float32 or Float64. */
function row(random: SeededRandom, size: number, wide: boolean): Float32Array | Float64Array {
  const values = wide ? new Float64Array(size) : new Float32Array(size);
  const repeated = [1.25, -0.5, 3];
  for (let i = 0; i < size; i++) {
    const pick = random.uniform();
    values[i] = pick < 0.05 ? repeated[i % repeated.length]
      : pick < 0.07 ? -Infinity
      : pick < 0.08 ? Number.NaN
      : (random.uniform() * 2 - 1) * 6 + (random.uniform() < 0.01 ? 9 : 0);
  }
  // Never a row whose most likely entry is not finite: both paths refuse it (asserted below).
  values[Math.floor(random.uniform() * size)] = 4;
  return values;
}

const settings: readonly SamplingParams[] = [
  { temperature: 1, topP: 1, topK: 0, minP: 0 },
  { temperature: 0.7, topP: 0.95, topK: 0, minP: 0 },
  { temperature: 0.7, topP: 1, topK: 40, minP: 0 },
  { temperature: 1.3, topP: 0.5, topK: 7, minP: 0.02 },
  { temperature: 0.2, topP: 0.9, topK: 0, minP: 0.1 },
  { temperature: 1e-5, topP: 0.3, topK: 0, minP: 0 },
  { temperature: 2, topP: 0.999, topK: 1000, minP: 0 },
  { temperature: 0, topP: 1, topK: 0, minP: 0 },
];

test("native and JavaScript draws give the same token on every row, setting and seed", () => {
  const random = new SeededRandom(20261206);
  let compared = 0;
  for (const size of [1, 2, 3, 17, 333, 4096, 20000]) {
    for (let r = 0; r < 6; r++) {
      const logits = row(random, size, r % 2 === 1);
      for (const params of settings) {
        const seed = Math.floor(random.uniform() * 2 ** 40);
        const native = new SamplingRandom(seed);
        const js = new SamplingRandom(seed);
        for (let draw = 0; draw < 12; draw++) {
          assert.is(sampleToken(logits, params, native), sampleTokenInJs(logits, params, js), `size ${size} row ${r} ${JSON.stringify(params)} seed ${seed} draw ${draw}`);
          compared++;
        }
      }
    }
  }
  assert.is(compared, 7 * 6 * settings.length * 12);
});

test("the same on a 152k vocabulary, with the draws spread over many tokens", () => {
  const random = new SeededRandom(7);
  const logits = row(random, 151936, false);
  const drawn = new Set<number>();
  for (const params of settings.slice(0, 3)) {
    const native = new SamplingRandom(99);
    const js = new SamplingRandom(99);
    for (let draw = 0; draw < 40; draw++) {
      const id = sampleToken(logits, params, native);
      assert.is(id, sampleTokenInJs(logits, params, js), `${JSON.stringify(params)} draw ${draw}`);
      drawn.add(id);
    }
  }
  // Draws that all land on one token would compare nothing of the weights.
  assert.ok(drawn.size > 20, `${drawn.size} distinct tokens drawn`);
});

test("the draws' own exp is e^x in single precision to within 3e-7 over its whole range, and exactly 1 at 0", () => {
  assert.is(negativeExp(0), 1);
  let worst = 0;
  for (let i = 0; i <= 200000; i++) {
    const x = Math.fround(-86 * (i / 200000) ** 2);
    worst = Math.max(worst, Math.abs(negativeExp(x) / Math.exp(x) - 1));
  }
  assert.ok(worst < 3e-7, `largest relative error ${worst}`);
});

test("both refuse a row whose most likely entry is not finite", () => {
  const infinite = new Float32Array([0, Infinity, 1]);
  const params: SamplingParams = { temperature: 1, topP: 1, topK: 0, minP: 0 };
  assert.throws(() => sampleToken(infinite, params, new SamplingRandom(1)), /not finite|most likely token/);
  assert.throws(() => sampleTokenInJs(infinite, params, new SamplingRandom(1)), /most likely token/);
});

test.run();
