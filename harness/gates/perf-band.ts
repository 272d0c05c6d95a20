import type { Better, PerfBand } from "./baseline.js";

/**
 * The two edges of a perf band: `worst` is where failing starts (target worse by the tolerance),
 * `best` where "update the target" starts (better by update_beyond, default twice the tolerance).
 */
export function perfBandEdges(band: PerfBand, better: Better): { readonly worst: number; readonly best: number } {
  const beyond = 1 + (band.update_beyond ?? 2 * band.tolerance);
  return better === "higher"
    ? { worst: band.target * (1 - band.tolerance), best: band.target * beyond }
    : { worst: band.target * (1 + band.tolerance), best: band.target / beyond };
}
