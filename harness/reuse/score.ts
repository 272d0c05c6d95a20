import { describeBound, holdToBounds, type BoundResult } from "../accuracy/distribution-bounds.js";
import { teacherForcedAccuracy } from "../accuracy/teacher-forced.js";
import type { DistributionBounds } from "../suites/parity-suite.js";
import type { CachedChatAnswer, CachedGreedyAnswer, TokenId } from "../sut/types.js";
import { commonPrefixLength } from "../parity/common-prefix.js";

/** One final request of a scenario: asked with the cache on (hit) and off (cold). */
export interface FinalPair {
  readonly final: readonly TokenId[];
  readonly hit: CachedGreedyAnswer;
  readonly cold: CachedGreedyAnswer;
}

/** Where a hit's ids first left the cold ones: which final request, which generated position, and the two ids there (null: that answer ended). */
export interface Divergence {
  readonly request: number;
  readonly position: number;
  readonly coldId: TokenId | null;
  readonly hitId: TokenId | null;
}

export type ScenarioScore =
  | { readonly status: "pass"; readonly bounds: readonly BoundResult[] }
  | { readonly status: "fail"; readonly divergence: Divergence | undefined; readonly bounds: readonly BoundResult[]; readonly why: string }
  /** The cold answer reports cached tokens: it was not cold, so nothing can be said of the hit. */
  | { readonly status: "not-cold"; readonly why: string };

export function firstDivergence(pairs: readonly FinalPair[]): Divergence | undefined {
  for (const [request, { hit, cold }] of pairs.entries()) {
    const position = commonPrefixLength(cold.ids, hit.ids);
    if (position < Math.max(cold.ids.length, hit.ids.length)) return { request, position, coldId: cold.ids[position] ?? null, hitId: hit.ids[position] ?? null };
  }
  return undefined;
}

/**
 * Holds a scenario's hits to its cold answers: greedy ids token for token, and, where both carry
 * top-k log-probs and bounds are given, the hit's distributions against the cold ones (the cold
 * answer in the oracle's place) along the ids they share. A cold answer that reports cached tokens
 * was not cold: the pair proves nothing, and says so.
 */
export function scoreScenario(pairs: readonly FinalPair[], bounds: DistributionBounds | undefined): ScenarioScore {
  const warmCold = pairs.findIndex((p) => (p.cold.cachedTokens ?? 0) > 0);
  if (warmCold >= 0) return { status: "not-cold", why: `the cold request ${warmCold} reports ${pairs[warmCold].cold.cachedTokens} cached prompt tokens: the server did not turn its cache off (cache_prompt: false)` };
  const divergence = firstDivergence(pairs);
  const results = bounds === undefined ? [] : boundsOnShared(pairs, bounds);
  const failed = results.filter((r) => !r.ok);
  if (divergence === undefined && failed.length === 0) return { status: "pass", bounds: results };
  const why = [
    ...(divergence === undefined ? [] : [`request ${divergence.request} diverges at generated position ${divergence.position}: cold ${divergence.coldId ?? "(ended)"}, hit ${divergence.hitId ?? "(ended)"}`]),
    ...failed.map(describeBound),
  ].join("; ");
  return { status: "fail", divergence, bounds: results, why };
}

/** Bounds on the hit's top-k against the cold top-k, at every generated position before the two answers part; none when either lacks top-k. */
function boundsOnShared(pairs: readonly FinalPair[], bounds: DistributionBounds): BoundResult[] {
  if (!pairs.every((p) => p.hit.topK !== undefined && p.cold.topK !== undefined)) return [];
  const shared = pairs.map((p) => commonPrefixLength(p.cold.ids, p.hit.ids));
  const accuracy = teacherForcedAccuracy(
    pairs.map((p, i) => p.cold.ids.slice(0, shared[i])),
    pairs.map((p, i) => p.cold.topK!.slice(0, shared[i])),
    pairs.map((p, i) => p.hit.topK!.slice(0, shared[i])),
  );
  return holdToBounds(accuracy, bounds);
}

/** A chat hit against its cold answer, character for character (position: the first differing character). */
export function scoreChat(hit: CachedChatAnswer, cold: CachedChatAnswer): ScenarioScore {
  if ((cold.cachedTokens ?? 0) > 0) return { status: "not-cold", why: `the cold chat request reports ${cold.cachedTokens} cached prompt tokens: the server did not turn its cache off (cache_prompt: false)` };
  const coldChars = [...cold.text];
  const hitChars = [...hit.text];
  const position = commonPrefixLength(coldChars.map((c) => c.codePointAt(0)!), hitChars.map((c) => c.codePointAt(0)!));
  if (position === Math.max(coldChars.length, hitChars.length)) return { status: "pass", bounds: [] };
  return {
    status: "fail", bounds: [], divergence: { request: 0, position, coldId: null, hitId: null },
    why: `the chat answer diverges at character ${position}: cold ${JSON.stringify(cold.text.slice(0, position + 8))}, hit ${JSON.stringify(hit.text.slice(0, position + 8))}`,
  };
}
