import { dequantizeInputs, matvecInputs, referenceDequantize, referenceMatvec } from "../../kernels/reference.js";
import { caseName, scoreDequantize, scoreMatvec, type KernelOutcome } from "../kernels/score.js";
import { SutGoneError } from "../sut/sut-gone.js";
import { UnsupportedRequestError } from "../sut/unsupported.js";
import { SutTimeoutError } from "../sut/with-timeout.js";
import type { KernelCase } from "../suites/kernel-suite.js";
import { ErrorsInCells, makeCell, runCheck, type ArmScope } from "./check.js";

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
  const notRun: string[] = [];
  for (const op of ["dequantize", "matvec"] as const) {
    const cases = context.cases.filter((c) => c.spec.op === op);
    if (cases.length === 0) continue;
    await runCheck(context, op, "required", [op], async (gate) => {
      const results: KernelOutcome[] = [];
      const skipped: string[] = [];
      const errors: string[] = [];
      let stopped = false;
      for (const { index, spec } of cases) {
        if (context.signal.aborted) break;
        const caseCell = (status: "pass" | "fail" | "skip" | "error", detail: string) => makeCell(context, op, gate, { status, detail }, ` --case ${index}`);
        try {
          const outcome = await runCase(context, spec);
          results.push(outcome);
          await context.emit({ kind: "cells", cells: [caseCell(outcome.pass ? "pass" : "fail", outcome.line)] });
        } catch (error) {
          // One case's trouble stays that case's: a type the plugin lacks is SKIPPED, an error is that case's error.
          const line = `${caseName(spec)}: ${error instanceof Error ? error.message : String(error)}`;
          if (error instanceof UnsupportedRequestError) {
            skipped.push(line);
            await context.emit({ kind: "cells", cells: [caseCell("skip", `SKIPPED ${line}`)] });
            continue;
          }
          errors.push(line);
          await context.emit({ kind: "cells", cells: [caseCell("error", line)] });
          if (error instanceof SutGoneError || error instanceof SutTimeoutError) {
            stopped = true;
            break;
          }
        }
      }
      outcomes.push(...results);
      notRun.push(...skipped, ...errors);
      const passed = results.filter((r) => r.pass).length;
      if (errors.length > 0) throw new ErrorsInCells(`${errors.length} ${op} case(s) errored: ${errors[0]}${stopped ? "; the SUT is gone, later cases did not run" : ""}`);
      const worst = Math.max(0, ...results.map((r) => r.envelopeUse ?? 0));
      if (passed === results.length && skipped.length > 0) {
        return { status: "skip", reason: `${passed}/${results.length + skipped.length} ${op} cases OK, ${skipped.length} not run: ${skipped.join("; ")}` };
      }
      return {
        status: passed === results.length ? "pass" : "fail",
        summary: `${passed}/${results.length} ${op} cases OK${op === "matvec" ? `, worst ${(100 * worst).toPrecision(3)}% of the float32 envelope` : ", bit-exact"}` +
          (skipped.length === 0 ? "" : `; ${skipped.length} SKIPPED (${skipped.join("; ")})`),
        metrics: { cases: results.length, passed, skipped: skipped.length, ...(op === "matvec" ? { worst_envelope_use: worst } : {}) },
      };
    });
  }
  if (outcomes.length === 0 && notRun.length === 0) return { summaryLine: undefined };
  const failing = outcomes.filter((o) => !o.pass);
  const informational = context.arm.gate === "informational" ? " (informational)" : "";
  const head = `${context.arm.label}${informational}: ${outcomes.length - failing.length}/${outcomes.length + notRun.length} kernel cases OK${notRun.length === 0 ? "" : `, ${notRun.length} not run`}`;
  return { summaryLine: [head, ...failing.map((o) => `  ${o.line}`), ...notRun.map((line) => `  NOT RUN ${line}`)].join("\n") };
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
