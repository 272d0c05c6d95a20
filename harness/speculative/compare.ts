import { commonPrefixLength } from "../parity/common-prefix.js";
import type { TokenId } from "../sut/types.js";

/** Where a speculative answer first leaves the plain one (an id null: that answer had ended). */
export interface Divergence {
  readonly position: number;
  readonly expected: TokenId | null;
  readonly observed: TokenId | null;
}

/** The first position where `observed` differs from `expected`, a length difference included; none when identical. */
export function firstDivergence(expected: readonly TokenId[], observed: readonly TokenId[]): Divergence | undefined {
  const position = commonPrefixLength(expected, observed);
  if (position === Math.max(expected.length, observed.length)) return undefined;
  return { position, expected: expected[position] ?? null, observed: observed[position] ?? null };
}

/** What a server reported of the requests of one pass (llama-server's `timings`). */
export interface PassCounts {
  readonly generated: number;
  readonly generatingMs: number;
  readonly drafted: number;
  readonly accepted: number;
}

export function sumCounts(requests: readonly PassCounts[]): PassCounts {
  return requests.reduce((sum, r) => ({ generated: sum.generated + r.generated, generatingMs: sum.generatingMs + r.generatingMs, drafted: sum.drafted + r.drafted, accepted: sum.accepted + r.accepted }),
    { generated: 0, generatingMs: 0, drafted: 0, accepted: 0 });
}

/** An arm's speculation figures (docs/speculative.md defines each). */
export interface SpeculationFigures {
  readonly drafted: number;
  readonly accepted: number;
  /** accepted / drafted; null when nothing was drafted. */
  readonly acceptance_rate: number | null;
  /**
   * Tokens one target evaluation yields: every target step emits one token of its own plus the
   * drafted tokens it accepted, so steps = generated − accepted and this is generated / steps.
   */
  readonly tokens_per_target_step: number | null;
  /** Generated tokens per second without and with speculation, the same requests one at a time; null when the server timed nothing. */
  readonly plain_tokens_per_s: number | null;
  readonly speculative_tokens_per_s: number | null;
  /** speculative_tokens_per_s / plain_tokens_per_s. */
  readonly speedup: number | null;
}

function tokensPerSecond(counts: PassCounts): number | null {
  return counts.generatingMs > 0 ? (1000 * counts.generated) / counts.generatingMs : null;
}

/** The figures of a speculating pass against the same requests' plain pass. */
export function speculationFigures(speculating: PassCounts, plain: PassCounts): SpeculationFigures {
  const steps = speculating.generated - speculating.accepted;
  const plainRate = tokensPerSecond(plain);
  const speculativeRate = tokensPerSecond(speculating);
  return {
    drafted: speculating.drafted,
    accepted: speculating.accepted,
    acceptance_rate: speculating.drafted === 0 ? null : speculating.accepted / speculating.drafted,
    tokens_per_target_step: steps <= 0 ? null : speculating.generated / steps,
    plain_tokens_per_s: plainRate,
    speculative_tokens_per_s: speculativeRate,
    speedup: plainRate === null || speculativeRate === null || plainRate === 0 ? null : speculativeRate / plainRate,
  };
}
