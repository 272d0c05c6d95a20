import type { TokenId } from "../sut/types.js";
import { commonPrefixLength } from "../parity/common-prefix.js";

/** What one arm answered to each final prompt it asked, keyed by the prompt's ids. */
export type AnswersByPrompt = Map<string, { readonly label: string; readonly cold: readonly TokenId[]; readonly hit: readonly TokenId[] }>;

export const promptKey = (ids: readonly TokenId[]): string => ids.join(",");

export interface PrefillDifference {
  readonly label: string;
  readonly which: "cold" | "hit";
  readonly position: number;
  readonly referenceId: TokenId | null;
  readonly observedId: TokenId | null;
}

/**
 * Holds an arm's answers to those of its reference arm (the same model prefilled another way: in
 * chunks of another size, or whole), prompt by prompt, over the final prompts both arms asked.
 * Prompts only one arm asked (a split point at its own ubatch) are not compared.
 */
export function compareWithReference(own: AnswersByPrompt, reference: AnswersByPrompt): { compared: number; differences: PrefillDifference[] } {
  let compared = 0;
  const differences: PrefillDifference[] = [];
  for (const [key, mine] of own) {
    const theirs = reference.get(key);
    if (theirs === undefined) continue;
    compared++;
    for (const which of ["cold", "hit"] as const) {
      const position = commonPrefixLength(theirs[which], mine[which]);
      if (position < Math.max(theirs[which].length, mine[which].length)) {
        differences.push({ label: mine.label, which, position, referenceId: theirs[which][position] ?? null, observedId: mine[which][position] ?? null });
        break;
      }
    }
  }
  return { compared, differences };
}
