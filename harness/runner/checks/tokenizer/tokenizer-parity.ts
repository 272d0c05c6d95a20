import { SPECIAL_TOKEN_MODES, type SpecialTokenMode } from "../../../suites/tokenizer-suite.js";
import { firstDivergence } from "../../../speculative/compare.js";
import { corpusCheck, quote } from "./corpus-check.js";
import type { Comparison, TokenizerArmContext, TokenizerSide } from "./tokenizer-arm-state.js";

/** Both tokenizers' ids on every text, in both special-token modes. */
export const tokenizerParityCheck = corpusCheck("tokenizer_parity", async (context, text) => {
  const comparisons: Comparison[] = [];
  for (const mode of SPECIAL_TOKEN_MODES) comparisons.push(await compareIds(context, text, mode));
  return comparisons;
});

/** Both tokenizers on one text in one special-token mode: the first differing id and both pieces, or agreement. */
async function compareIds(context: TokenizerArmContext, text: string, mode: SpecialTokenMode): Promise<Comparison> {
  const { expected, observed } = context;
  const [expectedIds, observedIds] = [await expected.encode(text, mode), await observed.encode(text, mode)];
  const diff = firstDivergence(expectedIds, observedIds);
  if (diff === undefined) return { where: mode, difference: undefined, agreement: `${observedIds.length} ids identical (${mode})` };
  const piece = async (id: number | null, side: TokenizerSide) => `${side.name} ${id === null ? "(end)" : `${id} ${quote(await side.piece(id))}`}`;
  return {
    where: mode,
    difference: {
      position: diff.position, expected_id: diff.expected, observed_id: diff.observed,
      detail: `special tokens ${mode}: first differs at id ${diff.position}: ${await piece(diff.expected, expected)} vs ${await piece(diff.observed, observed)}; ${expectedIds.length} vs ${observedIds.length} ids`,
    },
  };
}
