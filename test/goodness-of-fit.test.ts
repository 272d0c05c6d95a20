// test-tier: fast

/**
 * The goodness-of-fit test (harness/stats/goodness-of-fit.ts) against values published in
 * statistical tables: the chi-square law's critical points, Q(a, x) where it has a closed form,
 * and the pooling of small cells.
 */
import { test } from "uvu";
import * as assert from "uvu/assert";
import { chiSquareSurvival, goodnessOfFit, logGamma, poolCells, regularizedGammaQ } from "../harness/stats/goodness-of-fit.js";

const close = (actual: number, expected: number, relative: number, what: string) =>
  assert.ok(Math.abs(actual - expected) <= relative * Math.abs(expected), `${what}: ${actual} against ${expected}`);

test("ln Γ at integers and halves is ln((n-1)!) and ln(√π ...)", () => {
  assert.ok(Math.abs(logGamma(1)) < 1e-14, "ln Γ(1) = 0");
  close(logGamma(5), Math.log(24), 1e-13, "ln Γ(5)");
  close(logGamma(0.5), 0.5 * Math.log(Math.PI), 1e-13, "ln Γ(1/2)");
  close(logGamma(101), 363.73937555556347, 1e-13, "ln Γ(101) = ln 100!");
});

test("Q(1, x) = e^-x and Q(1/2, x) = erfc(√x), on both sides of a + 1 (series and continued fraction)", () => {
  for (const x of [0.1, 0.9, 1.5, 4, 30]) close(regularizedGammaQ(1, x), Math.exp(-x), 1e-12, `Q(1, ${x})`);
  // erfc values from tables: erfc(1) = 0.157299207050285, erfc(2) = 0.004677734981047266, erfc(0.5) = 0.4795001221869535.
  close(regularizedGammaQ(0.5, 1), 0.157299207050285, 1e-12, "Q(1/2, 1)");
  close(regularizedGammaQ(0.5, 4), 0.004677734981047266, 1e-11, "Q(1/2, 4)");
  close(regularizedGammaQ(0.5, 0.25), 0.4795001221869535, 1e-12, "Q(1/2, 1/4)");
  assert.is(regularizedGammaQ(3, 0), 1);
  assert.throws(() => regularizedGammaQ(0, 1), /a > 0/);
});

test("the chi-square law's upper critical points from the tables give their tail probabilities", () => {
  const table: [number, number, number][] = [
    [3.841458820694124, 1, 0.05], [6.634896601021214, 1, 0.01], [18.307038053275146, 10, 0.05], [29.58829844507442, 10, 0.001],
    [124.34211340400407, 100, 0.05], [45.31474661812587, 20, 0.001], [60.989529367863895, 20, 0.000005], [45.07614652416014, 12, 0.00001],
  ];
  for (const [x, df, p] of table) close(chiSquareSurvival(x, df), p, 1e-6, `P(χ²_${df} ≥ ${x})`);
});

test("small expected cells are pooled, smallest first, until the pool holds at least 5; a count in a cell of probability 0 is outside the support", () => {
  const pooled = poolCells([50, 30, 12, 4, 2, 2], [0.5, 0.3, 0.1, 0.04, 0.03, 0.03]);
  // Expected 50, 30, 10, 4, 3, 3: the 3, 3 and 4 pool to 10.
  assert.equal(pooled.expected.map((e) => Math.round(e * 1e9) / 1e9), [10, 30, 50, 10]);
  assert.equal(pooled.observed, [12, 30, 50, 8]);
  assert.is(pooled.pooled, 3);
  // A pool below 5 takes the smallest cell kept.
  const small = poolCells([90, 8, 2], [0.9, 0.08, 0.02]);
  assert.equal(small.observed, [90, 10]);
  assert.is(small.pooled, 2);
  const outside = goodnessOfFit([60, 39, 1], [0.6, 0.4, 0]);
  assert.is(outside.outsideSupport, 1);
  assert.is(outside.pValue, 0);
  assert.is(outside.value, Infinity);
});

test("G and Pearson's X² on a worked example: 3 cells, observed (30, 50, 20) against (0.25, 0.5, 0.25)", () => {
  const g = goodnessOfFit([30, 50, 20], [0.25, 0.5, 0.25], "g");
  // G = 2 (30 ln 1.2 + 0 + 20 ln 0.8) = 2.0131...; X² = (25 + 0 + 25)/25 = 2.
  close(g.value, 2 * (30 * Math.log(1.2) + 20 * Math.log(0.8)), 1e-12, "G");
  const x2 = goodnessOfFit([30, 50, 20], [0.25, 0.5, 0.25], "pearson");
  close(x2.value, 2, 1e-12, "X²");
  assert.is(x2.degreesOfFreedom, 2);
  close(x2.pValue, Math.exp(-1), 1e-12, "P(χ²_2 ≥ 2) = e^-1");
  const perfect = goodnessOfFit([25, 50, 25], [0.25, 0.5, 0.25]);
  assert.is(perfect.value, 0);
  assert.is(perfect.pValue, 1);
});

test.run();
