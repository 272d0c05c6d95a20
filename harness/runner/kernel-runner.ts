import { dequantizeInputs, matvecInputs, referenceDequantize, referenceMatvec } from "../../kernels/reference.js";
import { scoreDequantize, scoreMatvec, type KernelOutcome } from "../kernels/score.js";
import type { KernelCase } from "../suites/kernel-suite.js";
import { makeCell, runCheck, type ArmScope } from "./check.js";

export interface KernelArmContext extends ArmScope {
  /** The suite's cases with their indices (`--case` selects by index). */
  readonly cases: readonly { readonly index: number; readonly spec: KernelCase }[];
}

/**
 * Runs a kernel arm: one check per op (dequantize, matvec), one cell per case with its
 * reproducible line. A plugin without a kernel has that check SKIPPED with the reason.
 */
export async function runKernelArm(context: KernelArmContext): Promise<{ summaryLine: string | undefined }> {
  const outcomes: KernelOutcome[] = [];
  for (const op of ["dequantize", "matvec"] as const) {
    const cases = context.cases.filter((c) => c.spec.op === op);
    if (cases.length === 0) continue;
    await runCheck(context, op, "required", [op], async (gate) => {
      const results: KernelOutcome[] = [];
      for (const { index, spec } of cases) {
        if (context.signal.aborted) break;
        const outcome = await runCase(context, spec);
        results.push(outcome);
        await context.emit({ kind: "cells", cells: [makeCell(context, op, gate, { status: outcome.pass ? "pass" : "fail", detail: outcome.line }, ` --case ${index}`)] });
      }
      outcomes.push(...results);
      const passed = results.filter((r) => r.pass).length;
      const worst = Math.max(0, ...results.map((r) => r.envelopeUse ?? 0));
      return {
        status: passed === results.length ? "pass" : "fail",
        summary: `${passed}/${results.length} ${op} cases OK${op === "matvec" ? `, worst ${(100 * worst).toPrecision(3)}% of the float32 envelope` : ", bit-exact"}`,
        metrics: { cases: results.length, passed, ...(op === "matvec" ? { worst_envelope_use: worst } : {}) },
      };
    });
  }
  if (outcomes.length === 0) return { summaryLine: undefined };
  const failing = outcomes.filter((o) => !o.pass);
  return { summaryLine: [`${context.arm.label}: ${outcomes.length - failing.length}/${outcomes.length} kernel cases OK`, ...failing.map((o) => `  ${o.line}`)].join("\n") };
}

async function runCase(context: KernelArmContext, spec: KernelCase): Promise<KernelOutcome> {
  if (spec.op === "dequantize") {
    const inputs = dequantizeInputs(spec);
    const [observed] = await context.sut.dequantize!([inputs]);
    return scoreDequantize(spec, referenceDequantize(inputs), observed);
  }
  const inputs = matvecInputs(spec);
  const [observed] = await context.sut.matvec!([inputs]);
  return scoreMatvec(spec, referenceMatvec(inputs), observed);
}
