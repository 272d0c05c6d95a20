/**
 * Summary statistics of a sample, as llama-perplexity prints them: mean ± stderr with
 * stderr = sqrt((E[x²] − E[x]²)/(n − 1)), and percentiles by linear interpolation on the sorted
 * values. Spread is undefined (not 0) for a single sample.
 */
export interface Distribution {
  readonly n: number;
  readonly mean: number;
  readonly stderr: number | undefined;
  readonly std: number | undefined;
  readonly min: number;
  readonly max: number;
  /** The llama-perplexity ladder. */
  readonly p0_1: number;
  readonly p1: number;
  readonly p5: number;
  readonly p10: number;
  readonly median: number;
  readonly p90: number;
  readonly p95: number;
  readonly p99: number;
  readonly p99_9: number;
}

/** Percentile q in [0, 100] of ascending `sorted` by linear interpolation. */
export function percentile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return NaN;
  const rank = (q / 100) * (sorted.length - 1);
  const low = Math.floor(rank);
  const high = Math.min(sorted.length - 1, low + 1);
  return sorted[low] + (sorted[high] - sorted[low]) * (rank - low);
}

export function distribution(values: readonly number[]): Distribution | undefined {
  const n = values.length;
  if (n === 0) return undefined;
  const sorted = Float64Array.from(values).sort();
  let sum = 0;
  let sumSquares = 0;
  for (const v of values) {
    sum += v;
    sumSquares += v * v;
  }
  const mean = sum / n;
  const variance = n > 1 ? Math.max(0, (sumSquares / n - mean * mean) * (n / (n - 1))) : undefined;
  return {
    n,
    mean,
    stderr: n > 1 ? Math.sqrt(Math.max(0, sumSquares / n - mean * mean) / (n - 1)) : undefined,
    std: variance === undefined ? undefined : Math.sqrt(variance),
    min: sorted[0],
    max: sorted[n - 1],
    p0_1: percentile(sorted, 0.1),
    p1: percentile(sorted, 1),
    p5: percentile(sorted, 5),
    p10: percentile(sorted, 10),
    median: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p95: percentile(sorted, 95),
    p99: percentile(sorted, 99),
    p99_9: percentile(sorted, 99.9),
  };
}

/** A proportion with its binomial standard error sqrt(p(1−p)/(n−1)), as llama-perplexity's "Same top p". */
export function proportion(hits: number, n: number): { readonly p: number; readonly stderr: number | undefined } {
  const p = n === 0 ? NaN : hits / n;
  return { p, stderr: n > 1 ? Math.sqrt((p * (1 - p)) / (n - 1)) : undefined };
}
