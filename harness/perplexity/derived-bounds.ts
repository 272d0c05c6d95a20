import type { PerplexityBounds } from "../suites/perplexity-suite.js";

/** How the shipped quantized arms' bounds were set: upper bounds this much above the measured value, same top this far below it. */
export const UPPER_MARGIN = 1.25;
export const SAME_TOP_MARGIN = 0.02;

/** Rounded up to two significant digits (monotone: a larger value never gets a smaller bound). */
function roundUp(x: number): number {
  if (x <= 0) return 0;
  const step = 10 ** (Math.floor(Math.log10(x)) - 1);
  return Number.parseFloat((Math.ceil(x / step - 1e-9) * step).toPrecision(2));
}

/**
 * The bounds the shipped rule gives for the measured values, for the same bound names an arm sets:
 * UPPER_MARGIN × a max_ bound's value, a min_same_top SAME_TOP_MARGIN below its value (at 0 or above).
 */
export function boundsFromMeasured(names: readonly (keyof PerplexityBounds)[], measured: (bound: keyof PerplexityBounds) => number): PerplexityBounds {
  return Object.fromEntries(names.map((bound) => {
    const value = measured(bound);
    return [bound, bound === "min_same_top" ? Math.max(0, Math.floor((value - SAME_TOP_MARGIN) * 1000) / 1000) : roundUp(UPPER_MARGIN * value)];
  }));
}
