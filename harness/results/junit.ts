import type { GateVerdict } from "./types.js";

function escape(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/**
 * JUnit XML: one testsuite per suite, one testcase per gate verdict. A skipped required gate is
 * reported as a failure, because CI systems count <skipped/> as green and it is not a pass.
 */
export function renderJunit(runId: string, verdicts: readonly GateVerdict[]): string {
  const bySuite = new Map<string, GateVerdict[]>();
  for (const verdict of verdicts) bySuite.set(verdict.suite, [...(bySuite.get(verdict.suite) ?? []), verdict]);
  const lines = ['<?xml version="1.0" encoding="UTF-8"?>', `<testsuites name="bringup-bench ${escape(runId)}">`];
  for (const [suite, list] of bySuite) {
    const failures = list.filter((v) => v.status === "fail" || (v.status === "skip" && v.gate === "required")).length;
    const errors = list.filter((v) => v.status === "error").length;
    const skipped = list.filter((v) => v.status === "skip" && v.gate !== "required").length;
    lines.push(`  <testsuite name="${escape(suite)}" tests="${list.length}" failures="${failures}" errors="${errors}" skipped="${skipped}">`);
    for (const v of list) {
      const name = `${v.arm} :: ${v.check} [${v.gate}]`;
      lines.push(`    <testcase classname="${escape(`${suite}.${v.arm}`)}" name="${escape(name)}">`);
      if (v.status === "fail") lines.push(`      <failure message="${escape(v.summary)}"/>`);
      else if (v.status === "error") lines.push(`      <error message="${escape(v.reason)}"/>`);
      else if (v.status === "skip" && v.gate === "required") lines.push(`      <failure message="${escape(`SKIPPED — NOT A PASS: ${v.reason}`)}"/>`);
      else if (v.status === "skip") lines.push(`      <skipped message="${escape(v.reason)}"/>`);
      else lines.push(`      <system-out>${escape(v.summary)}</system-out>`);
      lines.push("    </testcase>");
    }
    lines.push("  </testsuite>");
  }
  lines.push("</testsuites>");
  return `${lines.join("\n")}\n`;
}
