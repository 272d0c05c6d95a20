import { buildCase, caseEncoding, caseName, kernelOp, type KernelCaseSpec, type KernelOpName } from "../../kernels/ops/registry.js";
import { measureCopyBandwidth, type CopyBandwidth } from "../kernels/copy-bandwidth.js";
import { scoreKernelCase, type KernelOutcome } from "../kernels/score.js";
import type { CellRecord } from "../results/types.js";
import { distribution } from "../stats/distribution.js";
import { checkKernelAnswer } from "../sut/answer-shape.js";
import { ACCUMULATION_UNIT_ROUNDOFF, type KernelTimingPlan } from "../sut/types.js";
import { UnsupportedRequestError } from "../sut/unsupported.js";
import { endsTheSut } from "../sut/with-timeout.js";
import { ErrorsInCells, makeCell, runCheck, type ArmScope } from "./check.js";

/**
 * Timing: 20 ms of warm-up, then at least 50 samples (a sample is a batch of about 1 ms of calls)
 * and 300 ms, at most 20,000 samples: enough for a median that holds still on a shared machine.
 */
export const DEFAULT_TIMING_PLAN: KernelTimingPlan = { warmupMs: 20, minSamples: 50, minTimeMs: 300, maxSamples: 20000 };

export interface KernelArmContext extends ArmScope {
  /** The suite's cases with their indices (`--case` selects by index). */
  readonly cases: readonly { readonly index: number; readonly spec: KernelCaseSpec }[];
  /** Time each passing case with this plan (`--time`), or not at all. */
  readonly timing: KernelTimingPlan | undefined;
}

type CaseResult = {
  readonly status: "pass" | "fail" | "skip" | "error";
  readonly line: string;
  readonly ratio: number | null;
  /** Skipped: why, naming the pair; errored: what went wrong. */
  readonly reason?: string;
  readonly timing?: Partial<CellRecord>;
  /** Timed: `12.3 µs/call (p10 …, p90 …), … GB/s = …% of copy bandwidth, … GFLOP/s`, for the console and summary.md. */
  readonly timingNote?: string;
};

const perSecond = (count: number, microseconds: number) => count / (microseconds * 1e3);

/**
 * Runs a kernel arm: one check per op, one cell per case with its reproducible line and its ratio
 * to the bound. A pair the SUT does not register (or, v1 plugin or runner, refuses as unsupported) is
 * SKIPPED by name, never passed; an error is its case's, and the other cases still run unless the
 * SUT is gone. With a timing plan, every passing case is also timed against the copy bandwidth
 * measured here.
 */
export async function runKernelArm(context: KernelArmContext): Promise<{ summaryLine: string | undefined }> {
  const results: { index: number; result: CaseResult }[] = [];
  const bandwidth = context.timing === undefined ? undefined : measureCopyBandwidth();
  // A case's op was validated against the registry when its suite loaded (validateKernelCase).
  const ops = [...new Set(context.cases.map((c) => c.spec.op as KernelOpName))];
  for (const op of ops) {
    const cases = context.cases.filter((c) => c.spec.op === op);
    await runCheck(context, op, "required", ["kernel"], async (gate) => {
      const mine: CaseResult[] = [];
      let sutGone = false;
      for (const { index, spec } of cases) {
        if (context.signal.aborted) break;
        let result: CaseResult;
        try {
          result = await runCase(context, spec, bandwidth);
        } catch (error) {
          // One case's trouble stays that case's; a SUT that is gone (a crashed plugin host) or stopped answering ends the check.
          sutGone = endsTheSut(error);
          result = failedCase(caseName(spec), error);
        }
        mine.push(result);
        results.push({ index, result });
        await context.emit({ kind: "cells", cells: [makeCell(context, op, gate, { status: result.status, detail: result.line, kernel_ratio: result.ratio, ...result.timing }, ` --case ${index}`)] });
        if (sutGone) break;
      }
      const errors = mine.filter((r) => r.status === "error");
      if (errors.length > 0) throw new ErrorsInCells(`${errors.length} ${op} case(s) errored: ${errors[0].line}${sutGone ? "; the SUT is gone, later cases of this check did not run" : ""}`);
      return opVerdict(op, mine);
    });
  }
  if (bandwidth !== undefined) await runTimingCheck(context, results.map((r) => r.result), bandwidth);
  if (results.length === 0) return { summaryLine: undefined };
  const passed = results.filter((r) => r.result.status === "pass").length;
  const others = results.filter((r) => r.result.status !== "pass").map((r) => `  ${r.result.line}${r.result.status === "fail" || r.result.status === "error" ? `  [rerun: ${context.reproduce} --case ${r.index}]` : ""}`);
  // Timed cases: one line each with its µs/call, so the console and summary.md carry what the cells do.
  const nameOf = (index: number) => caseName(context.cases.find((c) => c.index === index)!.spec);
  const timed = results.filter((r) => r.result.timingNote !== undefined).map((r) => `  ${nameOf(r.index)}: ${r.result.timingNote}`);
  // Cases after a SUT that went away (a crashed plugin) were never run: counted, not hidden.
  const notRun = results.filter((r) => r.result.status === "skip" || r.result.status === "error").length + context.cases.length - results.length;
  const informational = context.arm.gate === "informational" ? " (informational)" : "";
  return { summaryLine: [`${context.arm.label}${informational}: ${passed}/${context.cases.length} kernel cases OK${notRun > 0 ? `, ${notRun} not run` : ""}`, ...others, ...timed].join("\n") };
}

function opVerdict(op: string, results: readonly CaseResult[]) {
  if (results.length === 0) return { status: "skip" as const, reason: `no ${op} case ran: a check of zero cases cannot fail` };
  const count = (status: CaseResult["status"]) => results.filter((r) => r.status === status).length;
  const ratios = results.map((r) => r.ratio).filter((r): r is number => r !== null && Number.isFinite(r));
  const worst = ratios.length === 0 ? null : Math.max(...ratios);
  const metrics = { cases: results.length, passed: count("pass"), failed: count("fail"), skipped: count("skip"), worst_ratio: worst };
  const ratioNote = worst === null ? ", bit-exact" : `, worst ratio ${worst.toPrecision(3)} of the ${kernelOp(op).bound} bound`;
  const summary = `${count("pass")}/${results.length} ${op} cases OK${count("pass") > 0 ? ratioNote : ""}`;
  if (count("fail") > 0) return { status: "fail" as const, summary, metrics };
  // Never a pass: a pair the SUT does not register was not checked.
  if (count("skip") > 0) return { status: "skip" as const, reason: `${[...new Set(results.filter((r) => r.status === "skip").map((r) => r.reason))].join("; ")} (${summary})` };
  return { status: "pass" as const, summary, metrics };
}

/** A case the SUT refused as unsupported (the same SKIPPED as an unregistered pair), or one that errored. */
function failedCase(name: string, error: unknown): CaseResult {
  const reason = error instanceof Error ? error.message : String(error);
  if (error instanceof UnsupportedRequestError) return { status: "skip", line: `${name}: SKIPPED (${reason})`, ratio: null, reason };
  return { status: "error", line: `${name}: ${reason}`, ratio: null, reason };
}

async function runCase(context: KernelArmContext, spec: KernelCaseSpec, bandwidth: CopyBandwidth | undefined): Promise<CaseResult> {
  const name = caseName(spec);
  const encoding = caseEncoding(spec);
  const pair = (context.sut.kernelPairs ?? []).find((p) => p.op === spec.op && p.encoding === encoding);
  if (pair === undefined) {
    const reason = `${context.sut.label} does not register ${spec.op} ${encoding}`;
    return { status: "skip", line: `${name}: SKIPPED (${reason})`, ratio: null, reason };
  }
  const op = kernelOp(spec.op);
  const problem = buildCase(spec);
  // A kernel that declares a coarser accumulation is held to the bound derived with its unit roundoff, and the line says so.
  const expected = op.reference(problem, { u: ACCUMULATION_UNIT_ROUNDOFF[pair.accumulation ?? "f32"] });
  if (expected.some((e) => e.kind === "bounded" && e.bound.some((b) => !Number.isFinite(b)))) {
    // A check that cannot fail is not run: n·u ≥ 1 leaves no finite worst case to hold the kernel to.
    const reason = `${spec.op} ${encoding} at the declared ${pair.accumulation} accumulation has no finite bound for this shape (n·u ≥ 1)`;
    return { status: "skip", line: `${name}: SKIPPED (${reason})`, ratio: null, reason };
  }
  const observed = checkKernelAnswer(problem, await context.sut.kernel!(problem));
  // A wrong-shaped answer is this case's failure, with the reason.
  if (!observed.ok) return { status: "fail", line: `${name}: FAIL (${observed.reason})`, ratio: null };
  const outcome: KernelOutcome = scoreKernelCase(name, problem, expected, observed.value, pair.accumulation === undefined || pair.accumulation === "f32" ? op.bound : `${op.bound} (${pair.accumulation} accumulation, as declared)`);
  if (!outcome.pass || bandwidth === undefined || context.sut.kernelTime === undefined) return { status: outcome.pass ? "pass" : "fail", line: outcome.line, ratio: outcome.ratio };
  const timing = await context.sut.kernelTime(problem, context.timing!);
  const host = distribution([...timing.hostNs].map((ns) => ns / 1e3))!;
  const inPlugin = timing.inPluginNs === undefined ? undefined : distribution([...timing.inPluginNs].map((ns) => ns / 1e3));
  const { bytes, flops } = op.counts(problem);
  const gbps = perSecond(bytes, host.median);
  const timingNote = `${host.median.toPrecision(4)} µs/call (p10 ${host.p10.toPrecision(4)}, p90 ${host.p90.toPrecision(4)}, ${host.n} samples of ${timing.callsPerSample} calls), ${gbps.toPrecision(3)} GB/s = ${(100 * gbps / bandwidth.gbps).toPrecision(3)}% of copy bandwidth, ${perSecond(flops, host.median).toPrecision(3)} GFLOP/s`;
  return {
    status: "pass", ratio: outcome.ratio, timingNote,
    line: `${outcome.line}; ${timingNote}`,
    timing: {
      kernel_us_median: host.median, kernel_us_p10: host.p10, kernel_us_p90: host.p90, kernel_in_plugin_us_median: inPlugin?.median ?? null,
      kernel_gbps: gbps, kernel_gflops: perSecond(flops, host.median), kernel_bandwidth_fraction: gbps / bandwidth.gbps,
    },
  };
}

/** The timing pass of an arm (informational): the copy bandwidth it was measured against, and the harness's overhead. */
async function runTimingCheck(context: KernelArmContext, results: readonly CaseResult[], bandwidth: CopyBandwidth): Promise<void> {
  await runCheck(context, "kernel_time", "informational", ["kernel", "kernelTime"], async () => {
    const timed = results.filter((r) => r.timing?.kernel_us_median != null);
    if (timed.length === 0) return { status: "skip" as const, reason: "no case was timed (only passing cases are)" };
    const compared = timed.filter((r) => r.timing!.kernel_in_plugin_us_median != null).map((r) => ({
      apart: Math.abs(r.timing!.kernel_us_median! / r.timing!.kernel_in_plugin_us_median! - 1),
      spread: r.timing!.kernel_us_p90! / r.timing!.kernel_us_p10!,
    }));
    const apart = distribution(compared.map((c) => c.apart));
    const worst = compared.reduce<(typeof compared)[number] | undefined>((w, c) => (w === undefined || c.apart > w.apart ? c : w), undefined);
    const within = compared.filter((c) => c.apart <= 0.03).length;
    const overhead = apart === undefined || worst === undefined ? ""
      : `; harness medians vs the in-plugin C loop's ${(100 * apart.median).toFixed(1)}% apart (median), within 3% for ${within}/${compared.length} cases, worst ${(100 * worst.apart).toFixed(1)}% where p90/p10 = ${worst.spread.toFixed(1)}`;
    return {
      status: "pass",
      summary: `${timed.length} cases timed against a copy bandwidth of ${bandwidth.gbps.toPrecision(3)} GB/s (best of ${bandwidth.copies} copies of ${bandwidth.bytes / 2 ** 20} MiB)${overhead}`,
      metrics: { cases_timed: timed.length, copy_bandwidth_gbps: bandwidth.gbps, harness_apart_median: apart?.median ?? null, harness_within_3pct: within, harness_apart_worst: worst?.apart ?? null },
    };
  });
}
