import type { Goldens } from "./goldens.js";
import { percentile } from "../stats/distribution.js";

/**
 * What re-making one goldens directory changed: how many greedy ids moved, and the oracle's
 * top-1/top-2 gap (the margin a fault must overcome to flip a greedy pick) before and after.
 */
export interface GoldensGapDiff {
  readonly directory: string;
  readonly promptsChanged: number;
  readonly promptCount: number;
  readonly tokensChanged: number;
  readonly tokenCount: number;
  /** Smallest and median top-1/top-2 gap in mnats over every position; undefined without log-probs (K < 2). */
  readonly before?: GapSummary;
  readonly after?: GapSummary;
}

export interface GapSummary {
  readonly minMnats: number;
  readonly medianMnats: number;
}

function gapSummary(goldens: Goldens): GapSummary | undefined {
  if (goldens.topkLogprobs === undefined || goldens.manifest.K < 2) return undefined;
  const gaps = goldens.topkLogprobs.flatMap((prompt) => prompt.map((row) => (row[0] - row[1]) * 1000)).sort((a, b) => a - b);
  return { minMnats: gaps[0], medianMnats: percentile(gaps, 50) };
}

export function goldensGapDiff(before: Goldens, after: Goldens): GoldensGapDiff {
  let promptsChanged = 0;
  let tokensChanged = 0;
  let tokenCount = 0;
  after.greedyIds.forEach((ids, p) => {
    const old = before.greedyIds[p] ?? [];
    const moved = ids.filter((id, t) => old[t] !== id).length;
    tokensChanged += moved;
    tokenCount += ids.length;
    if (moved > 0) promptsChanged++;
  });
  return {
    directory: after.directory, promptsChanged, promptCount: after.greedyIds.length, tokensChanged, tokenCount,
    before: gapSummary(before), after: gapSummary(after),
  };
}

/** One line per directory, e.g. `goldens/x/parity16: greedy ids 12/16 prompts (140/256 tokens) changed; top-1/top-2 gap min 3 → 12 mnats, median 900 → 870`. */
export function renderGapDiff(diff: GoldensGapDiff): string {
  const ids = `greedy ids ${diff.promptsChanged}/${diff.promptCount} prompts (${diff.tokensChanged}/${diff.tokenCount} tokens) changed`;
  if (diff.before === undefined || diff.after === undefined) return `${diff.directory}: ${ids}; no top-k log-probs to compare`;
  const f = (x: number): string => x.toFixed(0);
  return `${diff.directory}: ${ids}; top-1/top-2 gap min ${f(diff.before.minMnats)} → ${f(diff.after.minMnats)} mnats, median ${f(diff.before.medianMnats)} → ${f(diff.after.medianMnats)}`;
}
