import { firstTextDifference } from "../../../tokenizer/first-text-difference.js";
import { corpusCheck, quote } from "./corpus-check.js";
import type { Comparison, TokenizerSide } from "./tokenizer-arm-state.js";

/** Each round-trip side's ids (special tokens parsed) decoded back to every text. */
export const detokenizeRoundtripCheck = corpusCheck("detokenize_roundtrip", async (context, text) => {
  const comparisons: Comparison[] = [];
  for (const side of context.roundTrips) comparisons.push(await roundTrip(side, text));
  return comparisons;
});

/** One side's ids (special tokens parsed) decoded back: the text that went in, or where it first differs. */
async function roundTrip(side: TokenizerSide, text: string): Promise<Comparison> {
  const ids = await side.encode(text, "parsed");
  const back = await side.decode(ids);
  const at = firstTextDifference(text, back);
  if (at === undefined) return { where: side.name, difference: undefined, agreement: `${side.name}: ${ids.length} ids decode to the text` };
  return {
    where: side.name,
    difference: { position: at, expected_id: null, observed_id: null, detail: `${side.name}: its ${ids.length} ids decode to ${quote(back.slice(Math.max(0, at - 8)))} where the text has ${quote(text.slice(Math.max(0, at - 8)))} (first differing UTF-16 unit ${at})` },
  };
}
