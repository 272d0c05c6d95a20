import { CONFORMANCE_CHECKS, type ConformanceTarget } from "../conformance/checks.js";
import { makeCell, runCheck, type ArmScope } from "./check.js";

export interface ConformanceArmContext extends ArmScope {
  readonly checks: readonly string[];
  readonly target: ConformanceTarget;
}

/** Runs each conformance check against one server: one cell per check, one verdict for the arm. */
export async function runConformanceArm(context: ConformanceArmContext): Promise<{ summaryLine: string | undefined }> {
  let line: string | undefined;
  await runCheck(context, "conformance", "required", [], async (gate) => {
    const results: { name: string; status: "pass" | "fail" | "skip"; detail: string }[] = [];
    for (const name of context.checks) {
      if (context.signal.aborted) break;
      await context.emit({ kind: "progress", message: `${context.suiteName} · ${context.arm.label} · ${name}` });
      const result = await CONFORMANCE_CHECKS[name](context.target).catch((error: unknown) => ({ status: "fail" as const, detail: `threw: ${error instanceof Error ? error.message : String(error)}` }));
      results.push({ name, ...result });
      await context.emit({ kind: "cells", cells: [makeCell(context, "conformance", gate, { status: result.status, prompt_class: name, detail: `${name}: ${result.detail}` })] });
    }
    const count = (status: string) => results.filter((r) => r.status === status).length;
    line = [`${context.arm.label} conformance: ${count("pass")}/${results.length} checks pass${count("skip") > 0 ? `, ${count("skip")} skipped` : ""}`,
      ...results.map((r) => `  ${r.status.toUpperCase().padEnd(4)} ${r.name}: ${r.detail}`)].join("\n");
    return {
      status: count("fail") === 0 && count("skip") === 0 ? "pass" : "fail",
      summary: `${count("pass")}/${results.length} checks pass${count("skip") > 0 ? ` (${count("skip")} skipped — not a pass)` : ""}${count("fail") > 0 ? `; failed: ${results.filter((r) => r.status === "fail").map((r) => r.name).join(", ")}` : ""}`,
      metrics: { checks: results.length, pass: count("pass"), fail: count("fail"), skip: count("skip") },
    };
  });
  return { summaryLine: line };
}
