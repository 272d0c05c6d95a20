// test-tier: fast

/**
 * The server's sampler on fixed distributions (server/sampling.ts): what it may draw at any
 * temperature a client can send, and that its draws follow p^(1/T) cut by top-k and top-p.
 * What a running server draws is test/server-sampling.test.ts.
 */
import { test } from "uvu";
import * as assert from "uvu/assert";
import { SeededRandom } from "../harness/fixtures/seeded-random.js";
import { MAX_SEED, sampleToken, SamplingRandom, type SamplingParams } from "../server/sampling.js";
import { BadRequest, parseCompletion } from "../server/requests.js";
import { rankedIds, rowFromProbabilities, rowLogSumExp, rowTopK, type LogitsRow } from "../server/logits-row.js";

/** id 0 has probability 0 (outside the support), and so have the ids the Map leaves out; the rest are a peaked softmax. */
const peaked = rowFromProbabilities(new Map<number, number>([[0, 0], [3, 0.05], [5, 0.6], [7, 0.3], [9, 0.05]]));
const params = (temperature: number, extra: Partial<SamplingParams> = {}): SamplingParams => ({ temperature, topP: 1, topK: 0, minP: 0, ...extra });

/** How often each id is drawn in `n` draws from one seeded generator. */
function frequencies(row: LogitsRow, sampling: SamplingParams, n: number): Map<number, number> {
  const random = new SamplingRandom(11);
  const counts = new Map<number, number>();
  for (let i = 0; i < n; i++) {
    const id = sampleToken(row, sampling, random);
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

test("at temperatures down to 1e-6 every draw is the most likely token (p^(1/T) underflowed to 0 for all, and the draw fell on id 0)", () => {
  for (const temperature of [1e-4, 1e-5, 1e-6, 1e-9]) {
    assert.equal([...frequencies(peaked, params(temperature), 500)], [[5, 500]], `temperature ${temperature}`);
  }
  // A top-p or top-k cut at a small temperature keeps the top token too.
  assert.equal([...frequencies(peaked, params(1e-6, { topP: 0.5, topK: 2 }), 200)], [[5, 200]]);
});

test("a token of probability 0 is never drawn, even at temperature 2", () => {
  const counts = frequencies(peaked, params(2), 20000);
  assert.not.ok(counts.has(0), JSON.stringify([...counts]));
  assert.equal([...counts.keys()].sort((a, b) => a - b), [3, 5, 7, 9]);
});

test("draws follow p^(1/T) renormalised, after the top-k and top-p cuts (OpenAI order: temperature first)", () => {
  const n = 20000;
  const expect = (sampling: SamplingParams, shares: Record<number, number>) => {
    const counts = frequencies(peaked, sampling, n);
    for (const [id, share] of Object.entries(shares)) {
      const seen = (counts.get(Number(id)) ?? 0) / n;
      // Four standard errors of a share over n draws: a fixed seed, so this is no flaky bound.
      assert.ok(Math.abs(seen - share) <= 4 * Math.sqrt(share * (1 - share) / n) + 1e-9, `${JSON.stringify(sampling)} id ${id}: ${seen} drawn, ${share} expected`);
    }
    assert.is([...counts.values()].reduce((a, b) => a + b, 0), n);
  };
  const squared = 0.05 ** 2 * 2 + 0.6 ** 2 + 0.3 ** 2;
  expect(params(0.5), { 3: 0.05 ** 2 / squared, 5: 0.6 ** 2 / squared, 7: 0.3 ** 2 / squared, 9: 0.05 ** 2 / squared });
  expect(params(1, { topK: 2 }), { 5: 0.6 / 0.9, 7: 0.3 / 0.9, 3: 0, 9: 0 });
  // At T = 0.5 the top token holds 0.36/0.455 = 0.79 of the mass: top_p 0.75 keeps it alone. At T = 1 it holds 0.6, and top_p 0.75 takes the second too.
  expect(params(0.5, { topP: 0.75 }), { 5: 1 });
  expect(params(1, { topP: 0.75 }), { 5: 0.6 / 0.9, 7: 0.3 / 0.9 });
});

test("ranking selects before it sorts, and agrees with a full sort: falling value, lower id first on ties", () => {
  const random = new SeededRandom(3);
  // Coarse values, so that many tie; a few -Infinity (masked tokens).
  const row = Float32Array.from({ length: 5000 }, () => { const u = random.uniform(); return u < 0.01 ? -Infinity : Math.round(u * 200) / 10; });
  const sorted = [...row.keys()].sort((a, b) => row[b] - row[a] || a - b);
  for (const n of [0, 1, 7, 40, 64, 1024, 4999, 5000, 6000]) assert.equal([...rankedIds(row, n)], sorted.slice(0, n), `n = ${n}`);
  const top = rowTopK(row, 3);
  assert.equal(top.ids, sorted.slice(0, 3));
  assert.ok(Math.abs(top.logprobs[0] - (row[sorted[0]] - rowLogSumExp(row))) < 1e-12);
});

test("top-p over a flat vocabulary: the nucleus's thousands of tokens are found whole, its last one drawable, nothing past it drawn", () => {
  // 5,000 tokens of slowly falling probability: at top_p 0.9 the nucleus holds most of them.
  const row = Float32Array.from({ length: 5000 }, (_, id) => -id * 5e-4);
  const weights = [...row].map((l) => Math.exp(l));
  const total = weights.reduce((a, b) => a + b, 0);
  let cumulative = 0;
  const nucleus = weights.findIndex((w) => (cumulative += w / total) >= 0.9) + 1;
  assert.ok(nucleus > 1000 && nucleus < 5000, `nucleus ${nucleus}`);
  const drawn = [...frequencies(row, params(1, { topP: 0.9 }), 1000).keys()];
  assert.ok(Math.max(...drawn) < nucleus, `${Math.max(...drawn)} drawn, nucleus ${nucleus}`);
  assert.ok(Math.max(...drawn) >= nucleus - 150, `the nucleus's tail is drawn: ${Math.max(...drawn)}, nucleus ${nucleus}`);
});

test("every seed the API accepts starts its own stream: seeds 2^32 apart differ (they wrapped), the same seed repeats", () => {
  const draws = (seed: number) => { const random = new SamplingRandom(seed); return Array.from({ length: 8 }, () => random.uniform()); };
  for (const seed of [0, 5, 2 ** 31, MAX_SEED - 2 ** 32]) {
    assert.not.equal(draws(seed), draws(seed + 2 ** 32), `seed ${seed}`);
    assert.equal(draws(seed), draws(seed));
  }
  assert.not.equal(draws(5), draws(6));
  assert.ok(draws(MAX_SEED).every((u) => u >= 0 && u < 1));
  assert.throws(() => new SamplingRandom(MAX_SEED + 1), /a sampling seed is an integer from 0 to 9007199254740991/);
});

test("min_p is parsed and honoured; logit_bias, the penalties and n > 1 are refused naming the parameter, their neutral values accepted", () => {
  const limits = { maxTokensCap: 64 };
  assert.is(parseCompletion({ prompt: "a", min_p: 0.2 }, limits).minP, 0.2);
  assert.is(parseCompletion({ prompt: "a" }, limits).minP, 0);
  const refusals: [Record<string, unknown>, string][] = [
    [{ min_p: 1.5 }, "min_p"], [{ logit_bias: { 5: 100 } }, "logit_bias"], [{ frequency_penalty: 0.5 }, "frequency_penalty"],
    [{ presence_penalty: -1 }, "presence_penalty"], [{ repeat_penalty: 1.1 }, "repeat_penalty"], [{ n: 2 }, "n"],
  ];
  for (const [extra, param] of refusals) {
    assert.throws(() => parseCompletion({ prompt: "a", ...extra }, limits), (error: unknown) => error instanceof BadRequest && error.param === param && error.message.includes(param), param);
  }
  // A client that sends the neutral value asks for nothing, and is answered.
  parseCompletion({ prompt: "a", logit_bias: {}, frequency_penalty: 0, presence_penalty: 0, repeat_penalty: 1, n: 1 }, limits);
  // min_p cuts relative to the most likely token: 0.4 keeps ids 5 (0.6) and 7 (0.3 ≥ 0.4 × 0.6), never 3 or 9 (0.05).
  const drawn = frequencies(peaked, params(1, { minP: 0.4 }), 400);
  assert.equal([...drawn.keys()].sort(), [5, 7]);
});

test.run();
