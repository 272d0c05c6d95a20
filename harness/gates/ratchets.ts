import { bytesText } from "../budget/format.js";
import { KERNEL_RATIO_FLOOR, type Baseline, type Better, type GatedMetrics, type PerfBand } from "./baseline.js";
import { perfBandEdges } from "./perf-band.js";
import { MAX_LEARNED_TOLERANCE, SPREAD_MULTIPLIER, tooNoisyToGate } from "./speed-bands.js";

/** One finding of the gate: failures fail it; warnings carry a hint and fail only under --strict when `strictFails`. */
export type GateFinding =
  | { readonly level: "fail"; readonly key: string; readonly message: string }
  | { readonly level: "warn"; readonly key: string; readonly message: string; readonly hint: string; readonly strictFails: boolean }
  | { readonly level: "ok"; readonly key: string; readonly message: string };

/**
 * Compares a run's gated metrics with a baseline. Pure: the same inputs give the same findings.
 * - parity: FORWARD-DIVERGENT must be 0 on required arms and may not rise on any; STRICT may not drop;
 * - needles: no Y of the baseline may be lost; kernels: no case that passed may fail;
 * - speed (speedFindings): gated only on the baseline's machine; a batch-1 speed with a ratio band
 *   is gated as a ratio to its suite's reference arm in the same run; otherwise worse than the
 *   target by more than the tolerance fails; better by more than update_beyond warns "update the target";
 * - kernel ratios: a passing case's worst ratio to its bound above max(baseline × (1 + tolerance), 1%) fails;
 * - trace: demand above baseline × (1 + tolerance) fails with "stop and report";
 * - memory: a group's peak above baseline × (1 + tolerance) fails, naming the group and by how much;
 * - a baseline taken with --accept-failing warns (fails under --strict);
 * - a gated metric with no baseline entry warns (fails under --strict);
 * - a baseline entry the run does not have warns (fails under --strict): a run that leaves out an
 *   arm, a needle grid, a kernel check, a perf band or a trace capture cannot pass by omission;
 *   entries of suites or arms the run did not select are named in one line instead.
 */
export function applyRatchets(metrics: GatedMetrics, baseline: Baseline): GateFinding[] {
  const findings: GateFinding[] = [];
  if (baseline.accepted_failing !== undefined) {
    findings.push({ level: "warn", key: "baseline", message: `taken from a run that did not pass (--accept-failing): ${baseline.accepted_failing}`,
      hint: "re-take it with `bench gate --update` from a passing run", strictFails: true });
  }
  const missing = (key: string, what: string): GateFinding => ({
    level: "warn", key, message: `no baseline entry for ${what}`, hint: "run `bench gate --update` to record it", strictFails: true,
  });

  for (const [key, p] of metrics.parity) {
    const base = baseline.parity[key];
    if (p.required && p.forwardDivergent > 0) findings.push({ level: "fail", key, message: `${p.forwardDivergent} FORWARD-DIVERGENT prompts on a required arm (must be 0)` });
    if (base === undefined) {
      findings.push(missing(key, "parity"));
      continue;
    }
    if (p.strict < base.strict) findings.push({ level: "fail", key, message: `STRICT dropped ${base.strict} → ${p.strict}` });
    else if (p.forwardDivergent > base.forward_divergent) findings.push({ level: "fail", key, message: `FORWARD-DIVERGENT rose ${base.forward_divergent} → ${p.forwardDivergent}` });
    else findings.push({ level: "ok", key, message: `STRICT ${p.strict} (baseline ${base.strict}), FORWARD-DIVERGENT ${p.forwardDivergent} (baseline ${base.forward_divergent})` });
  }

  for (const [key, ys] of metrics.needles) {
    const base = baseline.needles[key];
    if (base === undefined) {
      findings.push(missing(key, "the needle grid"));
      continue;
    }
    const lost = base.filter((cell) => !ys.includes(cell));
    if (lost.length > 0) findings.push({ level: "fail", key, message: `needle grid lost Y at ${lost.join(", ")}` });
    else findings.push({ level: "ok", key, message: `${ys.length} Y (baseline ${base.length})` });
  }

  for (const [key, passed] of metrics.kernels) {
    const base = baseline.kernels?.[key];
    if (base === undefined) {
      findings.push(missing(key, "these kernel cases"));
      continue;
    }
    const lost = base.filter((name) => !passed.includes(name));
    if (lost.length > 0) findings.push({ level: "fail", key, message: `kernel cases no longer pass: ${lost.join(", ")}` });
    else findings.push({ level: "ok", key, message: `${passed.length} cases pass (baseline ${base.length})` });
  }

  for (const [key, ratio] of metrics.kernelRatios) {
    const base = baseline.kernel_ratios?.[key];
    if (base === undefined) {
      findings.push(missing(key, "this kernel case's ratio to its bound"));
      continue;
    }
    const limit = Math.max(base.worst_ratio * (1 + base.tolerance), KERNEL_RATIO_FLOOR);
    const shown = (r: number) => `${(100 * r).toPrecision(3)}%`;
    if (ratio > limit) findings.push({ level: "fail", key, message: `worst ratio to its bound grew ${shown(base.worst_ratio)} → ${shown(ratio)} (limit ${shown(limit)}): ${base.worst_ratio > 0 ? `the kernel's error is ${(ratio / base.worst_ratio).toPrecision(3)}× the baseline's` : "the baseline's was 0"}` });
    else findings.push({ level: "ok", key, message: `worst ratio ${shown(ratio)} of its bound (baseline ${shown(base.worst_ratio)}, limit ${shown(limit)})` });
  }

  findings.push(...speedFindings(metrics, baseline, missing));

  for (const [key, bytes] of metrics.trace) {
    const base = baseline.trace[key];
    if (base === undefined) {
      findings.push(missing(key, "trace-region demand"));
      continue;
    }
    const limit = base.demand_bytes * (1 + base.tolerance);
    if (bytes > limit) findings.push({ level: "fail", key, message: `trace-region demand rose ${base.demand_bytes} → ${bytes} B: stop and report` });
    else findings.push({ level: "ok", key, message: `demand ${bytes} B (baseline ${base.demand_bytes} B)` });
  }

  findings.push(...memoryFindings(metrics, baseline, missing));

  // Entries of suites (or arms) the run did not select are out of its scope: named in one warning
  // (a failure under --strict, so a subset still cannot pass by omission), not one line each.
  const outOfScope: string[] = [];
  const inScope = (key: string) => {
    const [suite, arm] = key.split("/");
    return metrics.scope.suites.includes(suite) && (metrics.scope.arms.length === 0 || metrics.scope.arms.includes(arm));
  };
  const absent = (what: string, keys: readonly string[], present: ReadonlyMap<string, unknown>) => {
    for (const key of keys.filter((k) => !present.has(k))) {
      if (!inScope(key)) outOfScope.push(key);
      else findings.push({ level: "warn", key, message: `the baseline has ${what}, the run does not`, hint: "run what the baseline holds, or drop the entry with `bench gate --update`", strictFails: true });
    }
  };
  absent("a parity arm", Object.keys(baseline.parity), metrics.parity);
  absent("a needle grid", Object.keys(baseline.needles), metrics.needles);
  absent("a kernel check", Object.keys(baseline.kernels ?? {}), metrics.kernels);
  absent("a kernel case's ratio", Object.keys(baseline.kernel_ratios ?? {}), metrics.kernelRatios);
  absent("a perf band", Object.keys(baseline.perf), metrics.perf);
  absent("a speed ratio", Object.keys(baseline.speed_ratios ?? {}), metrics.speedRatios);
  absent("a trace capture", Object.keys(baseline.trace), metrics.trace);
  absent("a memory group's peak", Object.keys(baseline.memory ?? {}), metrics.memory);
  if (outOfScope.length > 0) {
    findings.push({
      level: "warn", key: "scope", strictFails: true, hint: "gate a run of the whole battery to compare them",
      message: `${outOfScope.length} baseline entr${outOfScope.length === 1 ? "y" : "ies"} outside this run's selection (suites ${metrics.scope.suites.join(", ")}${metrics.scope.arms.length === 0 ? "" : `; arms ${metrics.scope.arms.join(", ")}`}), not compared: ${outOfScope.join(", ")}`,
    });
  }
  return findings;
}

/** Each suite/arm/device/group's peak against the baseline's run: a group that grew beyond its tolerance fails, by name and by how much. */
function memoryFindings(metrics: GatedMetrics, baseline: Baseline, missing: (key: string, what: string) => GateFinding): GateFinding[] {
  return [...metrics.memory].map(([key, bytes]): GateFinding => {
    const base = baseline.memory?.[key];
    if (base === undefined) return missing(key, "this memory group's peak");
    const group = key.split("/").pop();
    const limit = base.peak_bytes * (1 + base.tolerance);
    const growth = base.peak_bytes > 0 ? `, ${(100 * (bytes / base.peak_bytes - 1)).toFixed(1)}%` : "";
    if (bytes > limit) return { level: "fail", key, message: `peak ${group} grew ${bytesText(base.peak_bytes)} → ${bytesText(bytes)} (+${bytesText(bytes - base.peak_bytes)}${growth}; tolerance ${(100 * base.tolerance).toFixed(0)}%)` };
    return { level: "ok", key, message: `peak ${group} ${bytesText(bytes)} (baseline ${bytesText(base.peak_bytes)}, limit ${bytesText(limit)})` };
  });
}

/**
 * The speed findings (docs/speed-gates.md). Speed belongs to a machine: a run on another machine
 * (or against a baseline that does not say which) has its speeds reported, never gated. On the
 * baseline's machine, a speed with a ratio band whose reference the run also measured is gated as
 * that ratio — the reference ran under the same load, so a busy machine cancels out — and its
 * absolute value is reported beside it; a reference's own speed says how busy the machine was and
 * is reported (a warning when outside its band); any other speed is gated on its absolute band.
 * A band learned from runs that scattered too widely (tooNoisyToGate) is reported, not gated.
 */
function speedFindings(metrics: GatedMetrics, baseline: Baseline, missing: (key: string, what: string) => GateFinding): GateFinding[] {
  const findings: GateFinding[] = [];
  const shown = (x: number) => Number(x.toPrecision(4)).toString();
  const sameMachine = baseline.machine === metrics.machine;
  const sameJobs = baseline.jobs === undefined || baseline.jobs === metrics.jobs;
  if (!sameMachine && metrics.perf.size > 0) {
    findings.push({
      level: "warn", key: "speed", strictFails: false,
      message: baseline.machine === undefined ? "the baseline does not say which machine its speeds were measured on: speed reported, not gated"
        : `the baseline's speeds were measured on ${baseline.machine}, this run on ${metrics.machine}: speed reported, not gated`,
      hint: "take a baseline on this machine from repeated runs: bench gate --update RUN RUN RUN",
    });
  } else if (!sameJobs && metrics.perf.size > 0) {
    findings.push({
      level: "warn", key: "speed", strictFails: false,
      message: `the baseline's speeds were measured at --jobs ${baseline.jobs}, this run ${metrics.jobs === undefined ? "did not record its --jobs" : `at --jobs ${metrics.jobs}`}: speed reported, not gated`,
      hint: `run with --jobs ${baseline.jobs}, or take a baseline at this run's --jobs: bench gate --update RUN RUN RUN`,
    });
  }
  const gated = sameMachine && sameJobs;
  const references = new Set(Object.values(baseline.speed_ratios ?? {}).map((r) => r.reference));
  const noisy: string[] = [];
  for (const [key, { value, better }] of metrics.perf) {
    const band = baseline.perf[key];
    if (band === undefined) {
      findings.push(missing(key, "this perf metric"));
      continue;
    }
    if (!gated) {
      findings.push({ level: "ok", key, message: `${shown(value)} (baseline ${band.target} ${sameMachine ? `at --jobs ${baseline.jobs}` : "on another machine"}): reported, not gated` });
      continue;
    }
    const ratioBand = baseline.speed_ratios?.[key];
    const ratio = metrics.speedRatios.get(key);
    if (ratioBand !== undefined && ratio !== undefined && ratio.reference === ratioBand.reference) {
      if (tooNoisyToGate(ratioBand)) {
        noisy.push(key);
        findings.push({ level: "ok", key, message: `× ${ratioBand.reference} in this run: ${shown(ratio.ratio)} (target ${ratioBand.target}; its runs spread ±${percentOf(ratioBand.spread!)}): reported, not gated` });
        continue;
      }
      const finding = perfFinding(key, ratio.ratio, better, ratioBand);
      findings.push({ ...finding, message: `× ${ratioBand.reference} in this run: ${finding.message} (absolute ${shown(value)}, not gated)` });
      continue;
    }
    if (tooNoisyToGate(band)) {
      noisy.push(key);
      findings.push({ level: "ok", key, message: `${shown(value)} (target ${band.target}; its runs spread ±${percentOf(band.spread!)}): reported, not gated` });
      continue;
    }
    const finding = perfFinding(key, value, better, band);
    if (references.has(key) && finding.level === "fail") {
      findings.push({ level: "warn", key, message: `reference speed ${finding.message}: the machine was busier than when the baseline was taken`, hint: "the ratios to it are what is gated", strictFails: false });
    } else {
      findings.push(finding);
    }
  }
  if (noisy.length > 0) {
    findings.push({
      level: "warn", key: "speed", strictFails: false,
      message: `${noisy.length} of ${metrics.perf.size} speeds reported, not gated: the runs their bands were learned from spread by more than ±${percentOf(MAX_LEARNED_TOLERANCE / SPREAD_MULTIPLIER)} around the median on this machine`,
      hint: "learn the bands from runs on a quieter machine (bench gate --update RUN RUN RUN)",
    });
  }
  return findings;
}

const percentOf = (fraction: number) => `${Math.round(fraction * 100)}%`;

function perfFinding(key: string, value: number, better: Better, band: PerfBand): GateFinding {
  const { worst, best } = perfBandEdges(band, better);
  const percent = `${(band.tolerance * 100).toFixed(0)}%`;
  const shown = (x: number) => Number(x.toPrecision(4)).toString();
  if (better === "higher") {
    if (value < worst) return { level: "fail", key, message: `${shown(value)} is below the band: target ${band.target} − ${percent} = ${shown(worst)}` };
    if (value > best) return { level: "warn", key, message: `${shown(value)} is far above the target ${band.target}`, hint: "update the target (bench gate --update)", strictFails: false };
    return { level: "ok", key, message: `${shown(value)} within [${shown(worst)}, ${shown(best)}]` };
  }
  if (value > worst) return { level: "fail", key, message: `${shown(value)} is above the band (lower is better): target ${band.target} + ${percent} = ${shown(worst)}` };
  if (value < best) return { level: "warn", key, message: `${shown(value)} is far below the target ${band.target} (lower is better)`, hint: "update the target (bench gate --update)", strictFails: false };
  return { level: "ok", key, message: `${shown(value)} within [${shown(best)}, ${shown(worst)}]` };
}

/** Line-by-line diff of two baselines' JSON, for `--update`. */
export function baselineDiff(before: string, after: string): string[] {
  const a = before.split("\n");
  const b = after.split("\n");
  const lines: string[] = [];
  const removed = a.filter((line) => !b.includes(line));
  const added = b.filter((line) => !a.includes(line));
  for (const line of removed) lines.push(`- ${line}`);
  for (const line of added) lines.push(`+ ${line}`);
  return lines;
}
