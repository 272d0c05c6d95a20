import type { CellRecord } from "../../../results/types.js";
import type { KnownTokenizerDifference, TokenizerArm, TokenizerComparison, TokenizerSuite } from "../../../suites/tokenizer-suite.js";
import { makeCell, type CheckOutcome } from "../../check.js";
import { judgeAgainstKnownList } from "../../known-differences.js";
import type { Comparison, TokenizerArmContext, TokenizerCheck } from "./tokenizer-arm-state.js";

const MAX_QUOTED = 48;
/** A text as a cell quotes it: JSON-escaped (tabs, CR, zero-width characters visible), long ones cut. */
export const quote = (text: string) => JSON.stringify(text.length > MAX_QUOTED ? `${text.slice(0, MAX_QUOTED)}…` : text);

/** The entry of the suite's list that explains this difference on this arm, if any. */
function knownDifference(suite: TokenizerSuite, arm: TokenizerArm, text: string, check: TokenizerComparison, where: Comparison["where"]): KnownTokenizerDifference | undefined {
  return suite.known_differences.find((known) => known.text === text && known.check === check && known.where === where && (known.models === undefined || known.models.includes(arm.model)));
}

/**
 * Runs one comparison over every text: a cell per text and side; a difference the suite lists is
 * recorded as an informational failure with its reason, an unlisted one fails the check, and a
 * listed one that no longer differs fails it too (the list must not outlive what it explains).
 */
export function corpusCheck<Name extends TokenizerComparison>(name: Name, compare: (context: TokenizerArmContext, text: string) => Promise<Comparison[]>): TokenizerCheck<Name> {
  const check = name;
  return {
    kind: "tokenizer",
    name,
    needs: [],
    level: ({ context }) => context.suite.checks[name],
    async run({ context }, gate): Promise<CheckOutcome> {
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
          comparisons = await compare(context, text);
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
    },
  };
}
