import type { TokenId, TopK } from "../sut/types.js";
import { cellGap, type CellGap } from "./gap.js";

export type PromptClass = "STRICT" | "NEAR-TIE" | "FORWARD-DIVERGENT";

export interface ParityCell {
  readonly position: number;
  readonly expectedId: TokenId;
  readonly observedId: TokenId;
  /** 0 on a STRICT prompt (no teacher forcing needed). */
  readonly gapMnats: number;
  readonly lowerBound: boolean;
  readonly withinBand: boolean;
}

export interface PromptParity {
  readonly prompt: number;
  readonly verdict: PromptClass;
  readonly cells: readonly ParityCell[];
  /** First position where the SUT left the oracle's greedy path, if any. */
  readonly firstDivergence: number | undefined;
  readonly maxGapMnats: number;
  readonly maxGapPosition: number | undefined;
}

/**
 * Classifies one prompt. `oracleOnSutPath` is the oracle teacher-forced on `prompt + SUT ids`
 * (required only when the ids differ from the goldens).
 */
export function classifyPrompt(
  prompt: number,
  goldenIds: readonly TokenId[],
  sutIds: readonly TokenId[],
  bandMnats: number,
  oracleOnSutPath?: readonly TopK[],
): PromptParity {
  const strict = goldenIds.length === sutIds.length && goldenIds.every((id, j) => id === sutIds[j]);
  if (strict) {
    const cells = goldenIds.map((id, position) => ({ position, expectedId: id, observedId: id, gapMnats: 0, lowerBound: false, withinBand: true }));
    return { prompt, verdict: "STRICT", cells, firstDivergence: undefined, maxGapMnats: 0, maxGapPosition: undefined };
  }
  if (oracleOnSutPath === undefined || oracleOnSutPath.length < sutIds.length) {
    throw new Error(`prompt ${prompt}: SUT ids differ from the goldens, and the oracle's teacher-forced rows on the SUT path are missing`);
  }
  const gaps: CellGap[] = sutIds.map((id, j) => cellGap(oracleOnSutPath[j], id));
  const cells = sutIds.map((id, position) => ({
    position,
    expectedId: gaps[position].oracleArgmax,
    observedId: id,
    gapMnats: gaps[position].gapMnats,
    lowerBound: gaps[position].lowerBound,
    withinBand: gaps[position].gapMnats <= bandMnats,
  }));
  let maxGapMnats = 0;
  let maxGapPosition: number | undefined;
  for (const cell of cells) {
    if (cell.gapMnats > maxGapMnats) {
      maxGapMnats = cell.gapMnats;
      maxGapPosition = cell.position;
    }
  }
  const firstDivergence = sutIds.findIndex((id, j) => id !== goldenIds[j]);
  return {
    prompt,
    verdict: cells.every((cell) => cell.withinBand) ? "NEAR-TIE" : "FORWARD-DIVERGENT",
    cells,
    firstDivergence: firstDivergence < 0 ? sutIds.length : firstDivergence,
    maxGapMnats,
    maxGapPosition,
  };
}

export interface ParityTally {
  readonly prompts: number;
  readonly strict: number;
  readonly nearTie: number;
  readonly forwardDivergent: number;
  /** Prompts whose answer was rejected before scoring (wrong shape, or an error on that prompt): each a failure. */
  readonly rejected: number;
  readonly maxGapMnats: number;
  readonly maxGapAt: { readonly prompt: number; readonly position: number } | undefined;
}

export function tallyParity(results: readonly PromptParity[], rejected = 0): ParityTally {
  let maxGapMnats = 0;
  let maxGapAt: ParityTally["maxGapAt"];
  for (const result of results) {
    if (result.maxGapMnats > maxGapMnats && result.maxGapPosition !== undefined) {
      maxGapMnats = result.maxGapMnats;
      maxGapAt = { prompt: result.prompt, position: result.maxGapPosition };
    }
  }
  return {
    prompts: results.length + rejected,
    rejected,
    strict: results.filter((r) => r.verdict === "STRICT").length,
    nearTie: results.filter((r) => r.verdict === "NEAR-TIE").length,
    forwardDivergent: results.filter((r) => r.verdict === "FORWARD-DIVERGENT").length,
    maxGapMnats,
    maxGapAt,
  };
}

/**
 * The field's summary line (vllm.cpp parity tests), number for number. An informational arm says
 * so: "0/16 prompts PASS" just above an exit-0 line must not read like a contradiction.
 */
export function paritySummaryLine(label: string, tally: ParityTally, informational = false): string {
  const n = tally.prompts;
  const at = tally.maxGapAt === undefined ? "" : ` @ prompt[${tally.maxGapAt.prompt}] tok=${tally.maxGapAt.position}`;
  const rejected = tally.rejected === 0 ? "" : `; ${tally.rejected} answers rejected`;
  return `${label} correctness gate${informational ? " (informational)" : ""}: ${tally.strict + tally.nearTie}/${n} prompts PASS (STRICT ${tally.strict}/${n}; ` +
    `near-tie-band only ${tally.nearTie}/${n}; max gap ${(tally.maxGapMnats / 1000).toFixed(3)} nats${at}; ${tally.forwardDivergent} forward-divergent${rejected})`;
}
