import type { LegRecord } from "./legs.js";
import type { GateVerdict } from "./types.js";

function escape(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** A required gate that did not run: CI systems count <skipped/> as green, and it is not a pass. */
const requiredSkip = (v: GateVerdict) => v.status === "skip" && v.gate === "required";
/** Only required gates decide the exit code, so only they may turn a CI report red. */
const failsRed = (v: GateVerdict) => v.gate === "required" && (v.status === "fail" || v.status === "skip");
const errorsRed = (v: GateVerdict) => v.gate === "required" && v.status === "error";

/** A failing verdict's arm's evidence (OOM figures, trace overflow, assertion, signal), so the CI page shows why without the run directory. */
export function evidenceText(legs: readonly LegRecord[], v: GateVerdict): string {
  const leg = legs.find((l) => l.suite === v.suite && l.arm === v.arm);
  const found = (leg?.evidence ?? []).filter((e) => !("reason" in v && v.reason.includes(e.summary))).map((e) => e.summary);
  if (leg === undefined || found.length === 0) return "";
  return ` [evidence: ${found.join("; ")}${leg.stderr_file === null ? "" : ` (stderr: ${leg.stderr_file})`}]`;
}

/**
 * JUnit XML: one testsuite per suite, one testcase per gate verdict. Required gates map to
 * <failure>/<error> (a skipped required gate is a failure: SKIPPED — NOT A PASS). An
 * informational gate never does, whatever its outcome: a run that exits 0 shows failures="0".
 * Its outcome is a property and a line in system-out instead.
 */
export function renderJunit(runId: string, verdicts: readonly GateVerdict[], legs: readonly LegRecord[] = []): string {
  const bySuite = new Map<string, GateVerdict[]>();
  for (const verdict of verdicts) bySuite.set(verdict.suite, [...(bySuite.get(verdict.suite) ?? []), verdict]);
  const lines = ['<?xml version="1.0" encoding="UTF-8"?>', `<testsuites name="bringup-bench ${escape(runId)}">`];
  for (const [suite, list] of bySuite) {
    const failures = list.filter(failsRed).length;
    const errors = list.filter(errorsRed).length;
    const skipped = list.filter((v) => v.status === "skip" && v.gate !== "required").length;
    lines.push(`  <testsuite name="${escape(suite)}" tests="${list.length}" failures="${failures}" errors="${errors}" skipped="${skipped}">`);
    for (const v of list) {
      const name = `${v.arm} :: ${v.check} [${v.gate}]`;
      const detail = ("summary" in v ? v.summary : v.reason) + (v.status === "fail" || v.status === "error" ? evidenceText(legs, v) : "");
      lines.push(`    <testcase classname="${escape(`${suite}.${v.arm}`)}" name="${escape(name)}">`);
      if (v.gate === "informational") lines.push(`      <properties><property name="informational_status" value="${v.status}"/></properties>`);
      if (requiredSkip(v)) lines.push(`      <failure message="${escape(`SKIPPED — NOT A PASS: ${detail}`)}"/>`);
      else if (failsRed(v)) lines.push(`      <failure message="${escape(detail)}"/>`);
      else if (errorsRed(v)) lines.push(`      <error message="${escape(detail)}"/>`);
      else if (v.status === "skip") lines.push(`      <skipped message="${escape(detail)}"/>`);
      else if (v.status === "pass") lines.push(`      <system-out>${escape(detail)}</system-out>`);
      else lines.push(`      <system-out>${escape(`informational ${v.status.toUpperCase()} (not gated): ${detail}`)}</system-out>`);
      lines.push("    </testcase>");
    }
    lines.push("  </testsuite>");
  }
  lines.push("</testsuites>");
  return `${lines.join("\n")}\n`;
}
