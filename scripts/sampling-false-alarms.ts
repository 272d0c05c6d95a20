/**
 * The sampling suite's false-alarm rate, measured (docs/sampling.md): every (arm, prompt, setting)
 * the shipped suite draws, with its draw count, drawn clean many times over and held to the same
 * G-test at the suite's level. Clean draws come from the expected distribution itself (inverse
 * CDF), or, for the arms that declare the OpenAI order, from our server's own sampler
 * (server/sampling.ts sampleToken) on the oracle's row with --our-sampler. A battery fails when
 * any of its fits does, as a run of the suite would.
 *
 *   npm run sampling-false-alarms -- [--batteries N] [--our-sampler] [--suite NAME] [--seed S]
 *
 * Prints the batteries that failed, the fits below the level and below 1e-2, 1e-3 and 1e-4 (where
 * a calibrated test's rate is the level itself), and a 95% upper bound on the battery rate.
 */
import { expectedDistribution } from "../harness/sampling/convention.js";
import { FullDistributions } from "../harness/sampling/full-distributions.js";
import { BenchError } from "../harness/errors.js";
import { drawnCases, resolveSetting } from "../harness/runner/checks/sampling/sampling-fit.js";
import { goodnessOfFit } from "../harness/stats/goodness-of-fit.js";
import { loadSuite } from "../harness/suites/load.js";
import type { SamplingSuite } from "../harness/suites/sampling-suite.js";
import { sampleToken, SamplingRandom } from "../server/sampling.js";

function option(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at < 0 ? undefined : process.argv[at + 1];
}

const batteries = Number(option("--batteries") ?? 5000);
const ourSampler = process.argv.includes("--our-sampler");
function suiteOrExit(name: string): SamplingSuite {
  try {
    return loadSuite(name) as SamplingSuite;
  } catch (error) {
    if (!(error instanceof BenchError)) throw error;
    console.error(`sampling-false-alarms: ${error.oneLine()}`);
    process.exit(2);
  }
}

const suite = suiteOrExit(option("--suite") ?? "sampling");
if (suite.kind !== "sampling" || !Number.isInteger(batteries) || batteries < 1) {
  console.error("usage: npm run sampling-false-alarms -- [--batteries N] [--our-sampler] [--suite NAME] (a sampling suite, N a positive integer)");
  process.exit(2);
}

interface Case {
  readonly label: string;
  readonly draws: number;
  readonly probabilities: Float64Array;
  /** Draws one token: our sampler on the oracle's row, or the inverse CDF of the expected distribution. */
  readonly draw: (random: SamplingRandom) => number;
}

/** Inverse CDF over the support (ids of positive probability), by binary search. */
function inverseCdf(probabilities: Float64Array): (random: SamplingRandom) => number {
  const ids = Array.from(probabilities.keys()).filter((id) => probabilities[id] > 0);
  const cumulative = new Float64Array(ids.length);
  let sum = 0;
  ids.forEach((id, i) => { sum += probabilities[id]; cumulative[i] = sum; });
  return (random) => {
    const u = random.uniform() * sum;
    let low = 0;
    let high = ids.length - 1;
    while (low < high) {
      const mid = (low + high) >> 1;
      if (cumulative[mid] > u) high = mid; else low = mid + 1;
    }
    return ids[low];
  };
}

const distributions = new FullDistributions();
const cases: Case[] = [];
try {
  for (const arm of suite.arms) {
    // The oracle's tokenizer stands in for the server's: on the suite's fixture the two give the same ids (the parity suites hold them to it).
    const ids = await distributions.tokenize(arm.model, suite.prompts.map((p) => p.text.repeat(p.repeat ?? 1)));
    const prompts = suite.prompts.map((p, index) => ({ index, label: p.label, ids: ids[index] }));
    for (const c of drawnCases(suite, arm, prompts)) {
      const { logprobs } = await distributions.at(arm.model, c.prompt.ids);
      const setting = resolveSetting(suite.settings[c.setting], logprobs);
      const expected = expectedDistribution(logprobs, setting, arm.convention);
      // The check skips these (unsettled, or nothing to fit): no false alarm can come from them.
      if (expected.unsettled !== undefined || expected.support < 2) continue;
      const row = Float32Array.from(logprobs);
      const params = { temperature: setting.temperature, topK: setting.top_k, topP: setting.top_p, minP: setting.min_p };
      cases.push({
        label: `${arm.label} / ${c.prompt.label} / setting ${c.setting}`, draws: c.draws, probabilities: expected.probabilities,
        draw: ourSampler && arm.convention === "openai" ? (random) => sampleToken(row, params, random) : inverseCdf(expected.probabilities),
      });
    }
  }
} finally {
  await distributions.close();
}

const THRESHOLDS = [1e-2, 1e-3, 1e-4, suite.level];
const below = THRESHOLDS.map(() => 0);
let failedBatteries = 0;
const random = new SamplingRandom(Number(option("--seed") ?? 1));
const started = Date.now();
for (let b = 0; b < batteries; b++) {
  let failed = false;
  for (const c of cases) {
    const counts = new Float64Array(c.probabilities.length);
    for (let i = 0; i < c.draws; i++) counts[c.draw(random)]++;
    const { pValue } = goodnessOfFit(counts, c.probabilities, "g");
    THRESHOLDS.forEach((t, i) => { if (pValue < t) below[i]++; });
    if (pValue < suite.level) failed = true;
  }
  if (failed) failedBatteries++;
}
const fits = batteries * cases.length;
const draws = batteries * cases.reduce((sum, c) => sum + c.draws, 0);
// With k events in n trials the exact 95% upper bound is near (k + 1.96·√k + 2)/n for small k; for k = 0 it is 3/n (the rule of three).
const upper = (k: number, n: number) => (k === 0 ? 3 / n : (k + 1.96 * Math.sqrt(k) + 2) / n);
console.log(`suite ${suite.name}: ${cases.length} fits a battery (${suite.arms.length} arms), ${batteries} clean batteries, ${fits} fits, ${draws} draws (${ourSampler ? "our server's sampler for the OpenAI arms" : "inverse CDF of the expected distribution"}), ${((Date.now() - started) / 1000).toFixed(1)} s`);
THRESHOLDS.forEach((t, i) => console.log(`  fits with p < ${t}: ${below[i]} of ${fits} (rate ${(below[i] / fits).toExponential(2)}; a calibrated test: ${t})`));
console.log(`  batteries failed at level ${suite.level}: ${failedBatteries} of ${batteries} (rate ${(failedBatteries / batteries).toExponential(2)}, 95% upper bound ${upper(failedBatteries, batteries).toExponential(2)}; Bonferroni bound ${(cases.length * suite.level).toExponential(2)})`);
