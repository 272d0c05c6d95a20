/**
 * Goodness of fit of observed counts to a model's probabilities: the G-test (likelihood ratio,
 * 2·Σ O·ln(O/E)) or Pearson's chi-square (Σ (O−E)²/E), with cells whose expected count is small
 * pooled first (the chi-square law of either statistic is a large-count approximation), and the
 * p-value as the upper tail of the chi-square law, Q(df/2, X/2), from the regularized incomplete
 * gamma function. Pure functions; a count in a cell of probability 0 is never pooled away: it is
 * a draw outside the support, reported on its own.
 */

export type FitStatistic = "g" | "pearson";

export interface FitResult {
  readonly statistic: FitStatistic;
  /** The statistic's value on the pooled cells (Infinity where a draw fell outside the support). */
  readonly value: number;
  readonly degreesOfFreedom: number;
  /** P(X ≥ value) under the chi-square law with degreesOfFreedom; 0 where a draw fell outside the support. */
  readonly pValue: number;
  /** Draws that fell in cells of probability 0. */
  readonly outsideSupport: number;
  /** Cells after pooling (the pooled one counted once), and how many small cells went into the pool. */
  readonly cells: number;
  readonly pooled: number;
  readonly draws: number;
}

/** Cells whose expected count is below this are pooled (the textbook rule for the chi-square approximation). */
export const MIN_EXPECTED = 5;

/** ln Γ(x) for x > 0 (Lanczos, g = 7, nine coefficients: about 15 significant digits). */
export function logGamma(x: number): number {
  if (x < 0.5) return Math.log(Math.PI / Math.abs(Math.sin(Math.PI * x))) - logGamma(1 - x);
  const c = [0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7];
  const z = x - 1;
  let sum = c[0];
  for (let i = 1; i < 9; i++) sum += c[i] / (z + i);
  const t = z + 7.5;
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(sum);
}

const EPSILON = 1e-15;
const MAX_ITERATIONS = 10_000;

/** P(a, x) by its power series: converges fast where x < a + 1. */
function lowerSeries(a: number, x: number): number {
  let term = 1 / a;
  let sum = term;
  for (let n = 1; n < MAX_ITERATIONS; n++) {
    term *= x / (a + n);
    sum += term;
    if (Math.abs(term) < Math.abs(sum) * EPSILON) break;
  }
  return sum * Math.exp(-x + a * Math.log(x) - logGamma(a));
}

/** Q(a, x) by its continued fraction (modified Lentz): converges fast where x ≥ a + 1. */
function upperFraction(a: number, x: number): number {
  const tiny = 1e-300;
  let b = x + 1 - a;
  let c = 1 / tiny;
  let d = 1 / b;
  let h = d;
  for (let i = 1; i < MAX_ITERATIONS; i++) {
    const an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (Math.abs(d) < tiny) d = tiny;
    c = b + an / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const delta = d * c;
    h *= delta;
    if (Math.abs(delta - 1) < EPSILON) break;
  }
  return Math.exp(-x + a * Math.log(x) - logGamma(a)) * h;
}

/** The regularized upper incomplete gamma function Q(a, x) = Γ(a, x)/Γ(a), a > 0, x ≥ 0. */
export function regularizedGammaQ(a: number, x: number): number {
  if (!(a > 0) || !(x >= 0)) throw new RangeError(`Q(a, x) needs a > 0 and x ≥ 0, not a = ${a}, x = ${x}`);
  if (x === 0) return 1;
  if (x === Infinity) return 0;
  // Each form where it converges; the other side by the complement (P + Q = 1).
  return x < a + 1 ? 1 - lowerSeries(a, x) : upperFraction(a, x);
}

/** P(X ≥ x) for X chi-square with `df` degrees of freedom. */
export function chiSquareSurvival(x: number, df: number): number {
  return regularizedGammaQ(df / 2, x / 2);
}

/**
 * Observed counts and expected counts after pooling: cells of positive probability whose expected
 * count is below MIN_EXPECTED go into one pool, smallest first; a pool still below it takes the
 * smallest cell that was kept. Cells of probability 0 are left out (outsideSupport counts them).
 */
export function poolCells(observed: ArrayLike<number>, probabilities: ArrayLike<number>): { readonly observed: number[]; readonly expected: number[]; readonly pooled: number; readonly outsideSupport: number; readonly draws: number } {
  if (observed.length !== probabilities.length) throw new RangeError(`${observed.length} counts for ${probabilities.length} probabilities`);
  let draws = 0;
  let outsideSupport = 0;
  for (let i = 0; i < observed.length; i++) {
    draws += observed[i];
    if (probabilities[i] === 0) outsideSupport += observed[i];
  }
  let mass = 0;
  for (let i = 0; i < probabilities.length; i++) mass += probabilities[i];
  const cells = Array.from({ length: observed.length }, (_, i) => i).filter((i) => probabilities[i] > 0)
    .map((i) => ({ observed: observed[i], expected: (draws * probabilities[i]) / mass }))
    .sort((a, b) => a.expected - b.expected);
  let pool = { observed: 0, expected: 0 };
  let pooled = 0;
  while (pooled < cells.length && cells[pooled].expected < MIN_EXPECTED) {
    pool = { observed: pool.observed + cells[pooled].observed, expected: pool.expected + cells[pooled].expected };
    pooled++;
  }
  const kept = cells.slice(pooled);
  if (pooled > 0 && pool.expected < MIN_EXPECTED && kept.length > 0) {
    const smallest = kept.shift()!;
    pool = { observed: pool.observed + smallest.observed, expected: pool.expected + smallest.expected };
    pooled++;
  }
  if (pooled > 0) kept.push(pool);
  return { observed: kept.map((c) => c.observed), expected: kept.map((c) => c.expected), pooled, outsideSupport, draws };
}

/**
 * The fit of `observed` (counts per cell) to `probabilities` (per cell, summing to 1 up to
 * rounding): the statistic on the pooled cells, its degrees of freedom (cells − 1, nothing
 * estimated from the draws), and its p-value. A draw outside the support makes the p-value 0:
 * no amount of luck draws a token the distribution cannot give.
 */
export function goodnessOfFit(observed: ArrayLike<number>, probabilities: ArrayLike<number>, statistic: FitStatistic = "g"): FitResult {
  const cells = poolCells(observed, probabilities);
  const degreesOfFreedom = cells.observed.length - 1;
  let value = 0;
  for (let i = 0; i < cells.observed.length; i++) {
    const o = cells.observed[i];
    const e = cells.expected[i];
    value += statistic === "g" ? (o === 0 ? 0 : 2 * o * Math.log(o / e)) : ((o - e) ** 2) / e;
  }
  // G's terms can sum to a hair below 0 in floating point when the fit is perfect.
  value = Math.max(0, value);
  const base = { statistic, degreesOfFreedom, cells: cells.observed.length, pooled: cells.pooled, draws: cells.draws, outsideSupport: cells.outsideSupport };
  if (cells.outsideSupport > 0) return { ...base, value: Infinity, pValue: 0 };
  return { ...base, value, pValue: degreesOfFreedom > 0 ? chiSquareSurvival(value, degreesOfFreedom) : 1 };
}
