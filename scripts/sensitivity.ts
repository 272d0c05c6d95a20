/**
 * npm run sensitivity — which faults the gates catch, and from what size. Each FAKE fault of the
 * catalogue (scripts/sensitivity/catalogue.ts) is run through the real `bench run` at increasing
 * sizes; the verdicts come from the run's summary.json, so whatever gates are required when this
 * runs are the gates measured. Then N clean runs count false alarms. Prints a Markdown table and
 * writes it (with every run directory) under --out-dir.
 *
 * Faults behind identity (scripts/sensitivity/behind-identity.ts) run the reference runner on the
 * goldens' own file: their identity check must PASS (a run where it does not is an ERROR row), and
 * the margin column says how far the smallest catch sits beyond the bound that caught it.
 *
 *   npm run sensitivity -- [--clean-runs 20] [--clean-suite parity16] [--prompts 16] [--reference-prompts 2]
 *     [--noise-sizes 0.003,0.01,0.03,0.1,0.3] [--only TEXT]... [--all-sizes] [--out-dir DIR]
 *
 * With --kernels, the kernel catalogue instead (scripts/sensitivity/kernel-faults.ts): each FAKE
 * kernel plugin against the shipped kernel suite (--kernel-suite, default owned-kernels); exit 1
 * when a fault is caught by no case.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { writeFileAtomicSync } from "../harness/io/atomic-write.js";
import { loadavg } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { PACKAGE_ROOT, RUNS_DIR } from "../harness/paths.js";
import { describeMachine, machineInfo } from "../harness/results/machine.js";
import type { RunSummary } from "../harness/results/read-run.js";
import { newRunId } from "../harness/results/run-directory.js";
import type { GateVerdict } from "../harness/results/types.js";
import { catalogue, type TrialRun } from "./sensitivity/catalogue.js";
import { KERNEL_FAULTS, kernelFaultTable, runKernelFault } from "./sensitivity/kernel-faults.js";
import { distributionMargin, formatMargin } from "./sensitivity/margin.js";
import { captureEvidence } from "./sensitivity/trace-faults.js";

const { values: flags } = parseArgs({
  options: {
    "clean-runs": { type: "string", default: "20" },
    "clean-suite": { type: "string", default: "parity16" },
    prompts: { type: "string", default: "16" },
    // The float64 reference is slow: two prompts (the fewest batch invariance can check) per run.
    "reference-prompts": { type: "string", default: "2" },
    "noise-sizes": { type: "string", default: "0.003,0.01,0.03,0.1,0.3" },
    only: { type: "string", multiple: true, default: [] },
    "all-sizes": { type: "boolean", default: false },
    "out-dir": { type: "string" },
    kernels: { type: "boolean", default: false },
    "kernel-suite": { type: "string", default: "owned-kernels" },
  },
});

function wholeNumberFlag(name: string, text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0) {
    console.error(`sensitivity: --${name} must be a whole number (got "${text}")`);
    process.exit(2);
  }
  return n;
}

const cleanRuns = wholeNumberFlag("clean-runs", flags["clean-runs"]);
const promptCount = wholeNumberFlag("prompts", flags.prompts);
const referencePromptCount = wholeNumberFlag("reference-prompts", flags["reference-prompts"]);
const noiseSizes = flags["noise-sizes"].split(",").map(Number);
if (noiseSizes.some((x) => !(x > 0))) {
  console.error(`sensitivity: --noise-sizes must be positive fractions, e.g. 0.01,0.1 (got "${flags["noise-sizes"]}")`);
  process.exit(2);
}
const outDir = resolve(flags["out-dir"] ?? join(RUNS_DIR, `sensitivity-${newRunId()}`));
const runsDir = join(outDir, "runs");
const scratch = join(outDir, "FAKE-models");
const load = () => loadavg().map((x) => x.toFixed(1)).join(" / ");
const loadAtStart = load();
const startedAt = new Date();
const commandLine = () => ["npm run sensitivity --", ...process.argv.slice(2).map((arg) => (/\s/.test(arg) ? JSON.stringify(arg) : arg))].join(" ").replace(/ --$/, "");
const minutesSince = (start: Date) => ((Date.now() - start.getTime()) / 60000).toFixed(1);

if (flags.kernels) {
  const rows = KERNEL_FAULTS.filter((f) => flags.only.length === 0 || flags.only.some((text) => f.fault.includes(text))).map((fault) => {
    const row = runKernelFault(fault, flags["kernel-suite"], join(outDir, "FAKE-plugins"), runsDir);
    console.error(`[sensitivity] ${fault.fault}: ${row.caught.length}/${row.cases} cases caught (exit ${row.exitCode})`);
    return row;
  });
  const table = [
    `Kernel sensitivity (FAKE plugins: the reference plugin with one planted fault each, against \`${flags["kernel-suite"]}\`; a case catches a fault when it fails, ratio = worst |error| / bound).`,
    `Command: \`${commandLine()}\`; ${startedAt.toISOString()}, ${minutesSince(startedAt)} min on ${describeMachine(machineInfo())}; load average at start ${loadAtStart}, at end ${load()}.`,
    "",
    ...kernelFaultTable(rows),
  ].join("\n");
  writeFileAtomicSync(join(outDir, "sensitivity.md"), `${table}\n`);
  console.log(table);
  console.log(`\nwritten to ${join(outDir, "sensitivity.md")}`);
  process.exit(rows.some((r) => r.caught.length === 0) ? 1 : 0);
}

mkdirSync(scratch, { recursive: true });
const promptSelection = (count: number): string[] => Array.from({ length: count }, (_, p) => ["--prompt", String(p)]).flat();
const promptArgs = promptSelection(promptCount);
const referencePromptArgs = promptSelection(referencePromptCount);

/** What one `bench run` said: its exit code and its verdicts, read back from summary.json. */
interface Trial {
  readonly exitCode: number | null;
  readonly verdicts: readonly GateVerdict[];
  readonly seconds: number;
  readonly stderrTail: string;
}

let runCounter = 0;
function benchRun(run: TrialRun): Trial {
  const runId = `r${String(++runCounter).padStart(3, "0")}`;
  const started = Date.now();
  const result = spawnSync(process.execPath, [join(PACKAGE_ROOT, "bin", "bench.js"), "run", ...run.args, "--runs-dir", runsDir, "--run-id", runId], {
    cwd: PACKAGE_ROOT, encoding: "utf8", env: { ...process.env, NO_COLOR: "1", ...run.env }, maxBuffer: 64 * 1024 * 1024,
  });
  let verdicts: readonly GateVerdict[] = [];
  try {
    verdicts = (JSON.parse(readFileSync(join(runsDir, runId, "summary.json"), "utf8")) as RunSummary).verdicts;
  } catch {
    // No summary: the run failed before it opened (bad input); the exit code and stderr say why.
  }
  return { exitCode: result.status, verdicts, seconds: (Date.now() - started) / 1000, stderrTail: (result.stderr ?? "").trim().split("\n").slice(-1)[0] ?? "" };
}

/** The required verdicts that failed, as `check` (arm): identity checks are listed apart, they see any edited file. */
function caughtBy(trial: Trial): { numeric: string[]; identity: string[] } {
  const failed = trial.verdicts.filter((v) => v.gate === "required" && v.status === "fail");
  const names = (vs: readonly GateVerdict[]) => [...new Set(vs.map((v) => v.check))];
  return { numeric: names(failed.filter((v) => !/identity/i.test(v.check))), identity: names(failed.filter((v) => /identity/i.test(v.check))) };
}

/** The teacher-forced KLD the run measured (gated or not): how far the fault moved the distribution. */
function kldNote(trial: Trial): string {
  const verdict = trial.verdicts.find((v) => v.check === "teacher_forced" && "metrics" in v);
  const kld = verdict !== undefined && "metrics" in verdict ? verdict.metrics.kld_topk_mean : undefined;
  return typeof kld === "number" ? `, KLD ${kld.toExponential(1)}` : "";
}

/** What one fault run said, with the figures that show it: the KLD, and a failed capture check's figure. */
function outcome(trial: Trial, behindIdentity: boolean): string {
  return verdictOf(trial, behindIdentity) + kldNote(trial) + captureEvidence(trial.verdicts);
}

/** Behind identity, a run whose identity check did not PASS measured nothing: why, or undefined when it passed. */
function identityBroken(trial: Trial): string | undefined {
  const identity = trial.verdicts.filter((v) => v.check === "identity");
  if (identity.length > 0 && identity.every((v) => v.status === "pass")) return undefined;
  return identity.length === 0 ? "no identity verdict" : identity.map((v) => `identity ${v.status}`).join(", ");
}

function verdictOf(trial: Trial, behindIdentity = false): string {
  const broken = behindIdentity && trial.verdicts.length > 0 ? identityBroken(trial) : undefined;
  if (broken !== undefined) return `ERROR (behind identity, but ${broken}: the run measured nothing)`;
  const { numeric, identity } = caughtBy(trial);
  if (numeric.length > 0) return `caught by ${numeric.join(", ")}`;
  const errors = trial.verdicts.filter((v) => v.status === "error").map((v) => v.check);
  if (trial.exitCode === 2 || errors.length > 0) return `ERROR (exit ${trial.exitCode}${errors.length > 0 ? `: ${errors.join(", ")}` : `: ${trial.stderrTail}`})`;
  if (identity.length > 0) return `only identity (${identity.join(", ")})`;
  if (trial.exitCode === 77) return "not caught (a required gate SKIPPED)";
  return trial.exitCode === 0 ? "not caught (exit 0)" : `not caught (exit ${trial.exitCode})`;
}

const families = catalogue(noiseSizes).filter((f) => flags.only.length === 0 || flags.only.some((text) => f.name.includes(text)));
const rows: string[] = [];
// Each distinct control run once: its exit code (0 = the clean SUT passes this arm's gates).
const controls = new Map<string, number | null>();
// A control that fails or a behind-identity run whose identity did not pass measured nothing: exit 2 after the table.
let measuredNothing = 0;
for (const family of families) {
  if (family.control !== undefined) {
    const run = await family.control.prepare(scratch, family.behindIdentity === true ? referencePromptArgs : promptArgs);
    const key = JSON.stringify(run);
    if (!controls.has(key)) {
      const trial = benchRun(run);
      controls.set(key, trial.exitCode);
      console.error(`[sensitivity] control (no fault) ${run.args.join(" ")}: exit ${trial.exitCode} (${trial.seconds.toFixed(1)} s)`);
    }
    const exitCode = controls.get(key);
    if (exitCode !== 0) {
      rows.push(`| ${family.name} | — | ERROR: the same run without the fault exits ${exitCode}, so no size measures anything | — | — | — |`);
      measuredNothing++;
      continue;
    }
  }
  const tried: string[] = [];
  // What the identity check said over the family's runs: PASS where the SUT ran the goldens' own file.
  const identityStatuses = new Set<string>();
  const caught: Array<{ label: string; gates: string[]; margin: string }> = [];
  const behindIdentity = family.behindIdentity === true;
  for (const size of family.sizes) {
    const trial = benchRun(await size.prepare(scratch, behindIdentity ? referencePromptArgs : promptArgs));
    const said = outcome(trial, behindIdentity);
    tried.push(`${size.label}: ${said}`);
    for (const v of trial.verdicts) if (v.check === "identity") identityStatuses.add(v.status.toUpperCase());
    if (behindIdentity && trial.verdicts.length > 0 && identityBroken(trial) !== undefined) measuredNothing++;
    console.error(`[sensitivity] ${family.name} ${size.label}: ${said} (${trial.seconds.toFixed(1)} s)`);
    const { numeric } = caughtBy(trial);
    if (numeric.length > 0 && !(behindIdentity && identityBroken(trial) !== undefined)) {
      const margin = distributionMargin(trial.verdicts.find((v) => v.check === "distribution" && v.gate === "required" && v.status === "fail"));
      caught.push({ label: size.label, gates: numeric, margin: margin === undefined ? "— (not a distribution bound)" : formatMargin(margin) });
      if (family.graded && !flags["all-sizes"]) break;
    }
  }
  // Graded: the smallest size caught; variants: every one caught.
  const shown = family.graded ? caught.slice(0, 1) : caught;
  const threshold = shown.length === 0 ? `not caught at any ${family.graded ? "size" : "variant"} tried` : shown.map((c) => c.label).join("; ");
  const gates = shown.length === 0 ? "—" : [...new Set(shown.flatMap((c) => c.gates))].join(", ");
  const margins = shown.length === 0 ? "—" : [...new Set(shown.map((c) => c.margin))].join("; ");
  rows.push(`| ${family.name} | ${identityStatuses.size === 0 ? "— (no identity check)" : [...identityStatuses].join(" / ")} | ${threshold} | ${gates} | ${margins} | ${tried.join("; ")} |`);
}

let falseAlarms = 0;
const cleanOutcomes = new Map<string, number>();
for (let i = 0; i < cleanRuns; i++) {
  const trial = benchRun({ args: ["--suite", flags["clean-suite"]] });
  const said = trial.exitCode === 0 ? "exit 0" : verdictOf(trial);
  if (trial.exitCode !== 0) falseAlarms++;
  cleanOutcomes.set(said, (cleanOutcomes.get(said) ?? 0) + 1);
  console.error(`[sensitivity] clean ${flags["clean-suite"]} ${i + 1}/${cleanRuns}: ${said} (${trial.seconds.toFixed(1)} s)`);
}

const minutes = minutesSince(startedAt);
const command = commandLine();
const table = [
  `Sensitivity (FAKE faults: \`family: fault\` rows behind identity, the reference runner on the goldens' own file with BENCH_REFERENCE_FAULT, ${referencePromptCount} prompt(s) per run; the other rows on tiny-random unless named, ${promptCount} prompt(s) per run; graded faults in increasing size, larger ones not run once one is caught${flags["all-sizes"] ? " — here every size was run" : ""}; KLD: the teacher-forced KLD (top-k support) the run measured, gated or not).`,
  `Command: \`${command}\`; ${startedAt.toISOString()}, ${minutes} min on ${describeMachine(machineInfo())}; load average at start ${loadAtStart}, at end ${load()}.`,
  "",
  "| fault | identity | smallest size (or variants) caught | caught by (required checks failing there, identity never counted) | margin over the bound | every size tried |",
  "|---|---|---|---|---|---|",
  ...rows,
  "",
  cleanRuns === 0 ? "Clean runs: none (--clean-runs 0)." : `Clean runs: ${falseAlarms} false alarm(s) in ${cleanRuns} runs of \`bench run --suite ${flags["clean-suite"]}\` (${[...cleanOutcomes].map(([k, n]) => `${n}× ${k}`).join(", ")}).`,
].join("\n");
writeFileAtomicSync(join(outDir, "sensitivity.md"), `${table}\n`);
console.log(table);
console.log(`\nwritten to ${join(outDir, "sensitivity.md")}`);
if (measuredNothing > 0) {
  console.error(`sensitivity: ${measuredNothing} fault run(s) measured nothing (a failing control, or identity not PASS behind identity): see the ERROR rows`);
  process.exit(2);
}
