import type { CellRecord } from "../results/types.js";
import type { GateLevel } from "../suites/parity-suite.js";
import { SPECIAL_TOKEN_MODES, type KnownTokenizerDifference, type SpecialTokenMode, type TokenizerArm, type TokenizerComparison, type TokenizerSideName, type TokenizerSuite } from "../suites/tokenizer-suite.js";
import type { CorpusText } from "../tokenizer/corpus.js";
import { firstDivergence } from "../speculative/compare.js";
import { firstTextDifference } from "../tokenizer/first-text-difference.js";
import { makeCell, runCheck, type ArmScope, type CheckOutcome } from "./check.js";
import { judgeAgainstKnownList, type ReferenceComparison } from "./known-differences.js";

/** One tokenizer as the comparisons read it: ids with nothing added, ids back to text (special tokens rendered), one id's piece. Async: a runner answers over the protocol. */
export interface TokenizerSide {
  readonly name: TokenizerSideName;
  encode(text: string, mode: SpecialTokenMode): Promise<number[]>;
  decode(ids: readonly number[]): Promise<string>;
  piece(id: number): Promise<string>;
}

export interface TokenizerArmContext extends ArmScope {
  readonly suite: TokenizerSuite;
  readonly arm: TokenizerArm;
  /** The side the other is held to (the Hugging Face reference; llama.cpp on a runner arm), and the side held to it. */
  readonly expected: TokenizerSide;
  readonly observed: TokenizerSide;
  /** The sides whose round trips (text → ids → text) are checked. */
  readonly roundTrips: readonly TokenizerSide[];
  /** Why the arm cannot be compared here (a tool not built, a runner without `tokenize_special`), or undefined when it can. */
  readonly missing: string | undefined;
  /** The corpus texts this run asks, with their index in the corpus (`--prompt` selects them). */
  readonly texts: ReadonlyArray<CorpusText & { readonly index: number }>;
}

/** One comparison of one text: the two sides agree (and how), or where they first differ. */
type Comparison = { readonly where: KnownTokenizerDifference["where"] } & ReferenceComparison;

const MAX_QUOTED = 48;
/** A text as a cell quotes it: JSON-escaped (tabs, CR, zero-width characters visible), long ones cut. */
const quote = (text: string) => JSON.stringify(text.length > MAX_QUOTED ? `${text.slice(0, MAX_QUOTED)}…` : text);

/** The entry of the suite's list that explains this difference on this arm, if any. */
function knownDifference(suite: TokenizerSuite, arm: TokenizerArm, text: string, check: TokenizerComparison, where: Comparison["where"]): KnownTokenizerDifference | undefined {
  return suite.known_differences.find((known) => known.text === text && known.check === check && known.where === where && (known.models === undefined || known.models.includes(arm.model)));
}

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

/**
 * Runs one comparison over every text: a cell per text and side; a difference the suite lists is
 * recorded as an informational failure with its reason, an unlisted one fails the check, and a
 * listed one that no longer differs fails it too (the list must not outlive what it explains).
 */
async function compareCorpus(context: TokenizerArmContext, check: TokenizerComparison, level: GateLevel, compare: (text: string) => Promise<Comparison[]>): Promise<void> {
  await runCheck(context, check, level, [], async (gate): Promise<CheckOutcome> => {
    // A tool that is not built, a runner that cannot be asked, or no text selected: nothing could fail, so SKIPPED, never passed.
    const reason = context.missing ?? (context.texts.length === 0 ? "no corpus text selected: an empty corpus cannot fail" : undefined);
    if (reason !== undefined) {
      await context.emit({ kind: "cells", cells: [makeCell(context, check, gate, { status: "skip", detail: reason })] });
      return { status: "skip", reason };
    }
    const counts = { agree: 0, known: 0, unexplained: 0, stale: 0, errored: 0 };
    const unexplained: string[] = [];
    for (const { name, text, index } of context.texts) {
      if (context.signal.aborted) break;
      const cell = (fields: Partial<CellRecord> & Pick<CellRecord, "status" | "detail">, cellGate = gate) =>
        makeCell(context, check, cellGate, { prompt: index, prompt_class: name, ...fields, detail: `${name} ${quote(text)}: ${fields.detail}` }, ` --prompt ${index}`);
      let comparisons: Comparison[];
      try {
        comparisons = await compare(text);
      } catch (error) {
        counts.errored++;
        unexplained.push(name);
        await context.emit({ kind: "cells", cells: [cell({ status: "error", detail: error instanceof Error ? error.message : String(error) })] });
        continue;
      }
      const cells = comparisons.map((comparison) => {
        const judged = judgeAgainstKnownList(comparison, knownDifference(context.suite, context.arm, name, check, comparison.where),
          (agreement) => `listed as a known difference (${comparison.where}) but the two agree: ${agreement}; remove the entry from ${context.suite.path}`);
        counts[judged.outcome]++;
        if (judged.outcome === "stale") unexplained.push(`${name} (${comparison.where}, listed but agrees)`);
        if (judged.outcome === "unexplained") unexplained.push(`${name} (${comparison.where})`);
        return cell(judged.fields, judged.informational ? "informational" : gate);
      });
      await context.emit({ kind: "cells", cells });
    }
    const compared = counts.agree + counts.known + counts.unexplained + counts.stale;
    if (compared === 0 && counts.errored === 0) return { status: "skip", reason: "the run was stopped before the first text" };
    const failed = counts.unexplained + counts.stale + counts.errored;
    return {
      status: failed === 0 ? "pass" : "fail",
      summary: `${counts.agree}/${compared} comparisons agree, ${counts.known} known difference(s) explained in the suite${failed === 0 ? "" : `; FAIL: ${unexplained.slice(0, 6).join(", ")}${unexplained.length > 6 ? ", …" : ""}`}`,
      metrics: { texts: context.texts.length, comparisons: compared, agree: counts.agree, known: counts.known, unexplained: counts.unexplained, stale: counts.stale, errored: counts.errored },
    };
  });
}

/** A tokenizer arm: ids in both special-token modes, then the round trips. */
export async function runTokenizerArm(context: TokenizerArmContext): Promise<{ summaryLine: string | undefined }> {
  const { suite } = context;
  await compareCorpus(context, "tokenizer_parity", suite.checks.tokenizer_parity, async (text) => {
    const comparisons: Comparison[] = [];
    for (const mode of SPECIAL_TOKEN_MODES) comparisons.push(await compareIds(context, text, mode));
    return comparisons;
  });
  await compareCorpus(context, "detokenize_roundtrip", suite.checks.detokenize_roundtrip, async (text) => {
    const comparisons: Comparison[] = [];
    for (const side of context.roundTrips) comparisons.push(await roundTrip(side, text));
    return comparisons;
  });
  return { summaryLine: undefined };
}
