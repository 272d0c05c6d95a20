import { CONFORMANCE_CHECKS } from "../../../conformance/checks.js";
import { endsTheSut, timedCall } from "../../../sut/with-timeout.js";
import { makeCell } from "../../check.js";
import type { ConformanceCheck } from "./conformance-arm-state.js";

/** Each of the suite's API-contract checks against one server: one cell per check, one verdict for the arm. */
export const conformanceCheck: ConformanceCheck<"conformance"> = {
  kind: "conformance",
  name: "conformance",
  needs: [],
  level: () => "required",
  async run(state, gate) {
    const { context } = state;
    const results: { name: string; status: "pass" | "fail" | "skip"; detail: string }[] = [];
    for (const name of context.checks) {
      if (context.signal.aborted) break;
      await context.emit({ kind: "progress", message: `${context.suiteName} · ${context.arm.label} · ${name}` });
      // The checks ask the server directly, not through the leg's SUT: each is held to the per-case timeout here, its
      // requests aborted when it is given up on, and a server that stops answering ends the arm with an error, never a fail or a hang.
      const abandon = new AbortController();
      const check = timedCall(context.arm.label, `conformance check ${name} at ${context.target.baseUrl}`, CONFORMANCE_CHECKS[name], context.caseTimeout, context.signal, () => abandon.abort());
      const result = await check({ ...context.target, signal: abandon.signal }).catch((error: unknown) => {
        if (endsTheSut(error)) throw error;
        return { status: "fail" as const, detail: `threw: ${error instanceof Error ? error.message : String(error)}` };
      });
      results.push({ name, ...result });
      await context.emit({ kind: "cells", cells: [makeCell(context, "conformance", gate, { status: result.status, prompt_class: name, detail: `${name}: ${result.detail}` })] });
    }
    const count = (status: string) => results.filter((r) => r.status === status).length;
    state.summaryLine = [`${context.arm.label} conformance: ${count("pass")}/${results.length} checks pass${count("skip") > 0 ? `, ${count("skip")} skipped` : ""}`,
      ...results.map((r) => `  ${r.status.toUpperCase().padEnd(4)} ${r.name}: ${r.detail}`)].join("\n");
    return {
      status: count("fail") === 0 && count("skip") === 0 ? "pass" : "fail",
      summary: `${count("pass")}/${results.length} checks pass${count("skip") > 0 ? ` (${count("skip")} skipped — not a pass)` : ""}${count("fail") > 0 ? `; failed: ${results.filter((r) => r.status === "fail").map((r) => r.name).join(", ")}` : ""}`,
      metrics: { checks: results.length, pass: count("pass"), fail: count("fail"), skip: count("skip") },
    };
  },
};
