// test-tier: fast

/**
 * Sampler conventions (harness/sampling/convention.ts) on fixed distributions: where the OpenAI
 * order and llama.cpp's chain part, that our server's sampler (server/sampling.ts) draws what the
 * OpenAI order says, and that each planted sampler fault (server/sampling-faults.ts) draws
 * something the fit test rejects at the suite's level.
 */
import { test } from "uvu";
import * as assert from "uvu/assert";
import { SeededRandom } from "../harness/fixtures/seeded-random.js";
import { describeSetting, expectedDistribution, type SamplerConvention, type SamplingSetting } from "../harness/sampling/convention.js";
import { resolveSetting } from "../harness/runner/checks/sampling/sampling-fit.js";
import { goodnessOfFit } from "../harness/stats/goodness-of-fit.js";
import { loadSuite } from "../harness/suites/load.js";
import type { SamplingSuite } from "../harness/suites/sampling-suite.js";
import { SERVER_FAULTS } from "../server/faults.js";
import { isSamplerFault, sampleWithFault, type SamplerFault } from "../server/sampling-faults.js";
import { sampleToken, SamplingRandom, type SamplingParams } from "../server/sampling.js";

/** 100 log-probs of a random softmax with a spread like tiny-random's (a few nats between the top tokens). */
const logits = new SeededRandom(43).normalArray(100, 2.2);
const logSumExp = Math.log(logits.reduce((sum, l) => sum + Math.exp(l), 0));
const logprobs = Float64Array.from(logits, (l) => l - logSumExp);

const setting = (temperature: number, extra: Partial<SamplingSetting> = {}): SamplingSetting => ({ temperature, top_k: 0, top_p: 1, min_p: 0, ...extra });
const paramsOf = (s: SamplingSetting): SamplingParams => ({ temperature: s.temperature, topK: s.top_k, topP: s.top_p, minP: s.min_p });

/** The grid suites/sampling.json draws ("narrowest" resolved on this distribution); a fault must fail at least one of its settings. */
const GRID: SamplingSetting[] = (loadSuite("sampling") as SamplingSuite).settings.map((entry) => resolveSetting(entry, logprobs));
const DRAWS = 1500;
const LEVEL = 1e-5;

function counts(draw: () => number): Float64Array {
  const out = new Float64Array(logprobs.length);
  for (let i = 0; i < DRAWS; i++) out[draw()]++;
  return out;
}

test("no cut of the grid is unsettled on this distribution, and the two orders part wherever the temperature is not 1 and a cut acts", () => {
  for (const s of GRID) {
    const openai = expectedDistribution(logprobs, s, "openai");
    const llama = expectedDistribution(logprobs, s, "llama.cpp");
    assert.is(openai.unsettled, undefined, describeSetting(s));
    assert.is(llama.unsettled, undefined, describeSetting(s));
    const sum = openai.probabilities.reduce((a, b) => a + b, 0);
    assert.ok(Math.abs(sum - 1) < 1e-12);
    const same = openai.probabilities.every((p, id) => Math.abs(p - llama.probabilities[id]) < 1e-12);
    // top_k keeps the same k either way: only top_p and min_p see the temperature.
    if (s.temperature === 1 || (s.top_p === 1 && s.min_p === 0)) assert.ok(same, describeSetting(s));
  }
  const parts = (s: SamplingSetting) => expectedDistribution(logprobs, s, "openai").support !== expectedDistribution(logprobs, s, "llama.cpp").support;
  assert.ok(parts(setting(1.5, { top_p: 0.85 })) && parts(setting(0.7, { min_p: 0.1 })));
  assert.ok(GRID.length >= 9);
  // Temperature 0 is greedy in both.
  const greedy = expectedDistribution(logprobs, setting(0), "llama.cpp");
  assert.is(greedy.support, 1);
  assert.is(greedy.probabilities.indexOf(1), logprobs.indexOf(Math.max(...logprobs)));
});

test("a cut on a token within 1e-4 of it is unsettled, not decided by the oracle's last digits", () => {
  const flat = Float64Array.from([Math.log(0.5), Math.log(0.25), Math.log(0.25) - 5e-5, Math.log(0.0001)]);
  assert.match(expectedDistribution(flat, setting(1, { top_k: 2 }), "openai").unsettled ?? "", /top_k 2/);
  assert.match(expectedDistribution(flat, setting(1, { min_p: 0.5 }), "openai").unsettled ?? "", /min_p 0.5/);
  assert.match(expectedDistribution(flat, setting(1, { top_p: 0.75 }), "llama.cpp").unsettled ?? "", /top_p 0.75/);
});

test("our server's sampler draws what the OpenAI order says at every setting of the grid, and fails the llama.cpp order's where they part", () => {
  const random = new SamplingRandom(7);
  const row = Float32Array.from(logits);
  for (const s of GRID) {
    const drawn = counts(() => sampleToken(row, paramsOf(s), random));
    const fit = goodnessOfFit(drawn, expectedDistribution(logprobs, s, "openai").probabilities);
    assert.ok(fit.pValue > LEVEL, `${describeSetting(s)}: G ${fit.value.toFixed(1)}, p ${fit.pValue}`);
  }
  const parting = setting(1.5, { top_p: 0.85 });
  const other = goodnessOfFit(counts(() => sampleToken(row, paramsOf(parting), random)), expectedDistribution(logprobs, parting, "llama.cpp").probabilities);
  assert.ok(other.pValue < LEVEL, `the llama.cpp order fits our draws: p ${other.pValue}`);
});

test("each planted sampler fault fails the fit at the suite's level at some setting of the grid (sample-unseeded is the seeds check's, sample-params-ignored the parameters check's)", () => {
  const faults = SERVER_FAULTS.filter(isSamplerFault);
  assert.equal(faults.length, 7);
  const row = Float32Array.from(logits);
  const caught = (fault: SamplerFault, convention: SamplerConvention) => GRID.some((s) => {
    const random = new SamplingRandom(3);
    const fit = goodnessOfFit(counts(() => sampleWithFault(row, paramsOf(s), random, fault)), expectedDistribution(logprobs, s, convention).probabilities);
    return fit.pValue < LEVEL;
  });
  for (const fault of faults) assert.ok(caught(fault, "openai"), `${fault} passes every setting`);
  // The llama.cpp order itself is clean under the llama.cpp declaration.
  assert.not.ok(caught("sample-llama-order", "llama.cpp"), "the llama.cpp order fails its own convention");
});

test.run();
