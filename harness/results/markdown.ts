import type { VerdictCounts } from "./verdicts.js";
import type { GateVerdict } from "./types.js";
import { legLines, type LegRecord } from "./legs.js";

export interface MarkdownSummaryInput {
  readonly runId: string;
  readonly status: string;
  readonly exitCode: number | null;
  readonly summaryLines: readonly string[];
  readonly verdicts: readonly GateVerdict[];
  readonly counts: VerdictCounts;
  readonly machine: string;
  readonly legs: readonly LegRecord[];
}

function verdictWord(v: GateVerdict): string {
  if (v.status === "skip" && v.gate === "required") return "**SKIPPED — NOT A PASS**";
  return { pass: "PASS", fail: "**FAIL**", skip: "skipped", error: "**ERROR**" }[v.status];
}

/** summary.md: the parity lines as the field prints them, then one table row per gate. */
export function renderMarkdownSummary(input: MarkdownSummaryInput): string {
  const lines = [
    `# bringup-bench run ${input.runId}`,
    "",
    `Status: ${input.status}; exit code ${input.exitCode ?? "pending"}. Machine: ${input.machine}.`,
    `Gates: ${input.counts.pass} pass, ${input.counts.fail} fail (${input.counts.required_failed} required), ` +
      `${input.counts.skip} skipped (${input.counts.required_skipped} required), ${input.counts.error} error.`,
    "",
  ];
  if (input.summaryLines.length > 0) lines.push("```", ...input.summaryLines, "```", "");
  lines.push("| suite | arm | check | gate | verdict | summary |", "|---|---|---|---|---|---|");
  for (const v of input.verdicts) {
    const text = "summary" in v ? v.summary : v.reason;
    lines.push(`| ${v.suite} | ${v.arm} | ${v.check} | ${v.gate} | ${verdictWord(v)} | ${text.replace(/\|/g, "\\|")} |`);
  }
  const box = legLines(input.legs);
  if (box.length > 0) lines.push("", "## Box: resets and failure evidence", "", ...box.map((line) => `- ${line}`));
  return `${lines.join("\n")}\n`;
}
