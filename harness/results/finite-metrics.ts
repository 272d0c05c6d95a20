/** A verdict's metrics as summary.json holds them: JSON (and its schema) has no NaN or Infinity. */
export type VerdictMetrics = Record<string, number | string | null>;

/**
 * The metrics that are numbers but not finite ("key = value"), and the same metrics with those
 * set to null. A non-finite number is a broken measurement: every caller fails the verdict that
 * holds one and names these, never writes it as a pass.
 */
export function splitNonFinite(metrics: Readonly<VerdictMetrics>): { readonly nonFinite: string[]; readonly metrics: VerdictMetrics } {
  const nonFinite = Object.entries(metrics).filter(([, value]) => typeof value === "number" && !Number.isFinite(value)).map(([key, value]) => `${key} = ${String(value)}`);
  if (nonFinite.length === 0) return { nonFinite, metrics: { ...metrics } };
  return { nonFinite, metrics: Object.fromEntries(Object.entries(metrics).map(([key, value]) => [key, typeof value === "number" && !Number.isFinite(value) ? null : value])) };
}
