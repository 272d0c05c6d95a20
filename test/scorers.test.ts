// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { cellGap } from "../harness/parity/gap.js";
import { classifyPrompt, paritySummaryLine, tallyParity } from "../harness/parity/classify.js";
import { teacherForcedAccuracy } from "../harness/accuracy/teacher-forced.js";
import { kldOnOracleSupport } from "../harness/accuracy/kld.js";
import { distribution, percentile, proportion } from "../harness/stats/distribution.js";
import { exitCodeFor } from "../harness/results/verdicts.js";
import type { GateVerdict } from "../harness/results/types.js";

const row = (ids: number[], logprobs: number[]) => ({ ids, logprobs });

test("gap: milli-nats from the oracle argmax, 0 for the argmax, top-k lower bound outside it", () => {
  const oracle = row([5, 7, 9], [-0.1, -0.35, -2.0]);
  assert.equal(cellGap(oracle, 5), { gapMnats: 0, lowerBound: false, oracleArgmax: 5 });
  assert.equal(cellGap(oracle, 7), { gapMnats: 250, lowerBound: false, oracleArgmax: 5 });
  assert.equal(cellGap(oracle, 42), { gapMnats: 1900, lowerBound: true, oracleArgmax: 5 });
});

test("classify: STRICT, NEAR-TIE within the band, FORWARD-DIVERGENT beyond it; the band edge is inclusive", () => {
  const golden = [1, 2, 3];
  assert.is(classifyPrompt(0, golden, [1, 2, 3], 500).verdict, "STRICT");
  const path = [row([1, 4], [-0.1, -3]), row([2, 8], [-0.2, -0.7]), row([3, 9], [-0.1, -5])];
  const nearTie = classifyPrompt(1, golden, [1, 8, 3], 500, path);
  assert.is(nearTie.verdict, "NEAR-TIE");
  assert.is(nearTie.maxGapMnats, 500);
  assert.is(nearTie.maxGapPosition, 1);
  assert.is(nearTie.firstDivergence, 1);
  const divergent = classifyPrompt(2, golden, [1, 8, 3], 499, path);
  assert.is(divergent.verdict, "FORWARD-DIVERGENT");
  assert.is(divergent.cells[1].withinBand, false);
  assert.throws(() => classifyPrompt(3, golden, [1, 8, 3], 500), /teacher-forced rows on the SUT path are missing/);
});

test("summary line reads exactly like the field's parity gate", () => {
  const golden = [1, 2];
  const results = [
    classifyPrompt(0, golden, [1, 2], 500),
    classifyPrompt(1, golden, [1, 9], 500, [row([1], [-0.1]), row([2, 9], [-0.1, -0.4])]),
    classifyPrompt(2, golden, [7, 2], 500, [row([1, 7], [-0.01, -1.241]), row([2], [-0.1])]),
  ];
  const tally = tallyParity(results);
  assert.equal([tally.strict, tally.nearTie, tally.forwardDivergent, tally.maxGapMnats], [1, 1, 1, 1231]);
  assert.is(paritySummaryLine("Q4_K", tally),
    "Q4_K correctness gate: 2/3 prompts PASS (STRICT 1/3; near-tie-band only 1/3; max gap 1.231 nats @ prompt[2] tok=0; 1 forward-divergent)");
  // An informational arm says so, and prompts whose answers were rejected before scoring count as failures.
  assert.is(paritySummaryLine("Q4_K", tallyParity(results, 2), true),
    "Q4_K correctness gate (informational): 2/5 prompts PASS (STRICT 1/5; near-tie-band only 1/5; max gap 1.231 nats @ prompt[2] tok=0; 1 forward-divergent; 2 answers rejected)");
});

test("teacher-forced accuracy: top-1/top-5 as tt-metal defines them, KLD and Δp on hand-computed values", () => {
  const ln = Math.log;
  const oracle = [[row([1, 2], [ln(0.6), ln(0.4)]), row([3, 4], [ln(0.9), ln(0.1)])]];
  const sut = [[row([2, 1], [ln(0.5), ln(0.5)]), row([3, 4], [ln(0.9), ln(0.1)])]];
  const accuracy = teacherForcedAccuracy([[1, 3]], oracle, sut);
  assert.is(accuracy.positions, 2);
  assert.is(accuracy.top1.p, 0.5);
  assert.is(accuracy.top5.p, 1);
  // KLD at position 0: 0.6 ln(0.6/0.5) + 0.4 ln(0.4/0.5); position 1: 0.
  const kld0 = 0.6 * ln(0.6 / 0.5) + 0.4 * ln(0.4 / 0.5);
  assert.ok(Math.abs(accuracy.kldTopK!.mean - kld0 / 2) < 1e-12);
  assert.ok(Math.abs(accuracy.kldTopK!.max - kld0) < 1e-12);
  assert.ok(Math.abs(accuracy.deltaP!.mean - (0.5 - 0.6) / 2) < 1e-12);
  assert.ok(Math.abs(accuracy.rmsDeltaP - Math.sqrt(0.01 / 2)) < 1e-12);
  assert.is(accuracy.kldFlooredTerms, 0);
});

test("KLD on the oracle's support never goes negative, stays below the full-vocabulary KLD, and sees mass moved off the support", () => {
  const ln = Math.log;
  const klOf = (p: number[], q: number[]) => p.reduce((s, pi, i) => s + pi * ln(pi / q[i]), 0);
  // The oracle keeps 0.9 of its mass on {1, 2}; the SUT puts 0.99 there. The bare sum over the
  // support, 0.6 ln(0.6/0.65) + 0.3 ln(0.3/0.34), is -0.0856: the sign the old formula reported.
  const oracle = row([1, 2], [ln(0.6), ln(0.3)]);
  const crowded = kldOnOracleSupport(oracle, row([1, 2], [ln(0.65), ln(0.34)]));
  assert.ok(Math.abs(crowded.kld - (klOf([0.6, 0.3], [0.65, 0.34]) + 0.99 - 0.9)) < 1e-12, String(crowded.kld));
  assert.ok(crowded.kld > 0 && crowded.kld <= klOf([0.6, 0.3, 0.1], [0.65, 0.34, 0.01]));
  // Mass moved to a token outside the support: renormalised over the support the two are equal (0); here they are not.
  const leaked = kldOnOracleSupport(oracle, row([7, 1, 2], [ln(0.55), ln(0.3), ln(0.15)]));
  assert.ok(Math.abs(leaked.kld - (0.9 * ln(2) - 0.45)) < 1e-12, String(leaked.kld));
  // Log-probs a rounding apart: a tiny non-negative number, not a negative one.
  const close = kldOnOracleSupport(oracle, row([1, 2], [ln(0.6) + 1e-9, ln(0.3) - 3e-9]));
  assert.ok(close.kld >= 0 && close.kld < 1e-17, String(close.kld));
  // A token of the support the SUT left out takes the SUT's K-th log-prob, and is counted.
  assert.is(kldOnOracleSupport(oracle, row([1, 3], [ln(0.6), ln(0.2)])).floored, 1);
});

test("distribution: llama-perplexity stderr, linear-interpolated percentiles, undefined spread for one sample", () => {
  const d = distribution([1, 2, 3, 4])!;
  assert.is(d.mean, 2.5);
  assert.ok(Math.abs(d.stderr! - Math.sqrt((7.5 - 6.25) / 3)) < 1e-12);
  assert.is(d.median, 2.5);
  assert.is(percentile([1, 2, 3, 4], 90), 3.7);
  assert.is(distribution([5])!.stderr, undefined);
  assert.is(distribution([5])!.std, undefined);
  assert.is(distribution([]), undefined);
  assert.equal(proportion(3, 4), { p: 0.75, stderr: Math.sqrt((0.75 * 0.25) / 3) });
});

test("exit codes: error 2 > required fail 1 > required skip 77 > pass 0; informational never gates", () => {
  const v = (gate: "required" | "informational", status: GateVerdict["status"]): GateVerdict =>
    status === "pass" || status === "fail"
      ? { suite: "s", arm: "a", check: "greedy_parity", gate, status, summary: "", metrics: {} }
      : { suite: "s", arm: "a", check: "greedy_parity", gate, status, reason: "r" };
  assert.is(exitCodeFor([v("required", "pass")]), 0);
  assert.is(exitCodeFor([v("required", "pass"), v("informational", "fail"), v("informational", "error")]), 0);
  assert.is(exitCodeFor([v("required", "pass"), v("required", "skip")]), 77);
  assert.is(exitCodeFor([v("required", "fail"), v("required", "skip")]), 1);
  assert.is(exitCodeFor([v("required", "fail"), v("required", "error")]), 2);
  assert.is(exitCodeFor([v("informational", "pass")]), 77, "nothing required ran");
  assert.is(exitCodeFor([]), 77);
});

test.run();
