import type { CellRecord } from "../results/types.js";

/** One comparison against a reference: agreement (and how), or where the two first differ. */
export type ReferenceComparison =
  | { readonly difference: undefined; readonly agreement: string }
  | { readonly difference: Pick<CellRecord, "position" | "expected_id" | "observed_id"> & { readonly detail: string } };

/** What a comparison is once held to a suite's list of known differences. */
export type KnownListOutcome = "agree" | "stale" | "known" | "unexplained";

/**
 * A comparison held to the entry of the suite's list that names it, if any: agreement passes; a
 * listed entry that agrees is stale and fails (`staleDetail` of the agreement says how to fix it); a listed
 * difference is an informational fail with its reason; an unlisted one fails. Pure: the runners
 * (tokenizer, chat-template) turn it into their cells and counts.
 */
export function judgeAgainstKnownList(comparison: ReferenceComparison, known: { readonly reason: string } | undefined, staleDetail: (agreement: string) => string): {
  readonly outcome: KnownListOutcome;
  readonly informational: boolean;
  readonly fields: Pick<CellRecord, "status" | "detail"> & Partial<Pick<CellRecord, "position" | "expected_id" | "observed_id">>;
} {
  if (comparison.difference === undefined) {
    return known === undefined
      ? { outcome: "agree", informational: false, fields: { status: "pass", detail: comparison.agreement } }
      : { outcome: "stale", informational: false, fields: { status: "fail", detail: staleDetail(comparison.agreement) } };
  }
  const { detail, ...ids } = comparison.difference;
  return known === undefined
    ? { outcome: "unexplained", informational: false, fields: { status: "fail", ...ids, detail } }
    : { outcome: "known", informational: true, fields: { status: "fail", ...ids, detail: `KNOWN DIFFERENCE, ${detail}; why: ${known.reason}` } };
}
