/**
 * npm run variant-spread — the clean spread of every bound across ggml CPU variants. Runs the
 * suites clean under each variant this machine can load (bench run --cpu-variant, one variant at a
 * time), reads every verdict's bounds back from summary.json (a bound `max_x` or `min_x` with its
 * `max_x_measured`), and prints, per suite, arm and bound, the worst clean value over the variants
 * next to the bound, and how much of the bound it takes. A bound whose clean worst takes more than
 * 80% of it (less than the 25% margin docs/sensitivity.md asks of a catch) is marked ⚠; a clean run
 * that did not pass is listed with its variant. Only required verdicts count: an informational
 * arm's bounds gate nothing. Writes spread.json and spread.md under --out-dir.
 *
 *   npm run variant-spread -- [--variant NAME]... [--suite NAME]... [--out-dir DIR] [--jobs N] [--matrix-bound max_rms_delta_p]
 *
 * Then one bound (--matrix-bound) per arm and variant, side by side.
 *
 * A variant whose run the out-dir already holds, complete, is read back instead of run again, so
 * an interrupted spread resumes where it stopped.
 *
 * Default: every variant that loads here; the suites that compare llama.cpp with its goldens (the
 * kernel suites compute without it).
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { probeVariant, shippedCpuVariants } from "../harness/cpu/forced-variant.js";
import { writeFileAtomicSync } from "../harness/io/atomic-write.js";
import { PACKAGE_ROOT, RUNS_DIR } from "../harness/paths.js";
import { describeMachine, machineInfo } from "../harness/results/machine.js";
import type { RunSummary } from "../harness/results/read-run.js";
import { newRunId } from "../harness/results/run-directory.js";
import { boundRatio, WARN_WITHIN } from "./sensitivity/margin.js";

const SUITES = ["parity16", "zoo", "zoo-quick", "zoo-long", "niah", "niah-quick", "reuse", "speculative", "perplexity", "real-vocab", "serve-conformance"];

const { values: flags } = parseArgs({
  options: {
    variant: { type: "string", multiple: true, default: [] },
    suite: { type: "string", multiple: true, default: [] },
    "out-dir": { type: "string" },
    jobs: { type: "string", default: "2" },
    "matrix-bound": { type: "string", default: "max_rms_delta_p" },
  },
});

const shipped = shippedCpuVariants();
for (const name of flags.variant) {
  if (!shipped.includes(name)) {
    console.error(`variant-spread: --variant ${name} is not shipped; use one of ${shipped.join(", ")}`);
    process.exit(2);
  }
}
const outDir = resolve(flags["out-dir"] ?? join(RUNS_DIR, `variant-spread-${newRunId()}`));
mkdirSync(outDir, { recursive: true });
const suites = flags.suite.length > 0 ? flags.suite : SUITES;
const started = new Date();
const load = loadavg();

const candidates = flags.variant.length > 0 ? flags.variant : shipped;
const variants: string[] = [];
for (const name of candidates) {
  const probe = probeVariant(name);
  if (probe.loads) variants.push(name);
  else console.log(`${name}: not run (${probe.detail})`);
}

/** One bound of one verdict, under one variant. */
interface Measurement {
  readonly suite: string;
  readonly arm: string;
  readonly check: string;
  readonly bound: string;
  readonly limit: number;
  readonly measured: number;
  readonly variant: string;
}

const measurements: Measurement[] = [];
const notPassed: { variant: string; suite: string; arm: string; check: string; status: string; summary: string }[] = [];
const runs: { variant: string; exit: number | null; seconds: number; run: string }[] = [];

for (const variant of variants) {
  const runId = `spread-${variant}`;
  const summaryFile = join(outDir, runId, "summary.json");
  const t0 = Date.now();
  // A run this out-dir already holds, complete, is read again, not repeated: a long spread resumes.
  const kept = existsSync(summaryFile) ? JSON.parse(readFileSync(summaryFile, "utf8")) as RunSummary : undefined;
  const done = kept?.status === "complete";
  const child = done ? { status: kept.exit_code, stderr: "" } : spawnSync(process.execPath, [join(PACKAGE_ROOT, "bin", "bench.js"), "run", "--cpu-variant", variant, ...suites.flatMap((s) => ["--suite", s]), "--jobs", flags.jobs, "--runs-dir", outDir, "--run-id", runId], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], maxBuffer: 256 * 2 ** 20 });
  const seconds = (Date.now() - t0) / 1000;
  runs.push({ variant, exit: child.status, seconds, run: join(outDir, runId) });
  console.log(`${variant}: exit ${child.status}${done ? " (kept from an earlier spread in this out-dir)" : ` in ${seconds.toFixed(0)} s`}`);
  if (!existsSync(summaryFile)) {
    notPassed.push({ variant, suite: "—", arm: "—", check: "run", status: "error", summary: child.stderr.trim().split("\n").at(-1) ?? "" });
    continue;
  }
  const summary = JSON.parse(readFileSync(summaryFile, "utf8")) as RunSummary;
  for (const verdict of summary.verdicts) {
    if (!suites.includes(verdict.suite)) continue; // a kept run may hold more suites than this spread asks about
    if (verdict.status === "skip" || verdict.status === "error") {
      if (verdict.gate === "required") notPassed.push({ variant, suite: verdict.suite, arm: verdict.arm, check: verdict.check, status: verdict.status, summary: verdict.reason });
      continue;
    }
    if (verdict.gate !== "required") continue; // an informational arm's bounds gate nothing (the quantized arms sit far past them by design)
    if (verdict.status !== "pass") notPassed.push({ variant, suite: verdict.suite, arm: verdict.arm, check: verdict.check, status: verdict.status, summary: verdict.summary });
    for (const [bound, limit] of Object.entries(verdict.metrics)) {
      const measured = verdict.metrics[`${bound}_measured`];
      if (typeof limit === "number" && typeof measured === "number" && Number.isFinite(boundRatio(bound, limit, measured))) {
        measurements.push({ suite: verdict.suite, arm: verdict.arm, check: verdict.check, bound, limit, measured, variant });
      }
    }
  }
}

/** Per suite, arm, check and bound: the clean value that takes the most of the bound, over every variant. */
const worst = new Map<string, Measurement & { ratio: number; values: Record<string, number> }>();
for (const m of measurements) {
  const key = [m.suite, m.arm, m.check, m.bound].join("\u0000");
  const ratio = boundRatio(m.bound, m.limit, m.measured);
  const seen = worst.get(key);
  const values = { ...(seen?.values ?? {}), [m.variant]: m.measured };
  if (seen === undefined || ratio > seen.ratio) worst.set(key, { ...m, ratio, values });
  else worst.set(key, { ...seen, values });
}

const finished = new Date();
const fmt = (x: number): string => (x === 0 ? "0" : Math.abs(x) >= 0.01 && Math.abs(x) < 1000 ? x.toFixed(4).replace(/0+$/, "").replace(/\.$/, "") : x.toExponential(2));
const lines = [
  `Command: \`npm run variant-spread -- ${process.argv.slice(2).join(" ")}\`; ${started.toISOString()}, ${((finished.getTime() - started.getTime()) / 60000).toFixed(1)} min on ${describeMachine(machineInfo())}; load average at start ${load.map((x) => x.toFixed(1)).join(" / ")}.`,
  "",
  `Variants run: ${variants.join(", ")}. Suites: ${suites.join(", ")}.`,
  "",
  "| suite | arm | check | bound | clean worst (variant) | used | clean range over variants |",
  "|---|---|---|---|---|---|---|",
];
for (const w of [...worst.values()].sort((a, b) => b.ratio - a.ratio)) {
  const values = Object.values(w.values);
  const flag = w.ratio > 1 ? "✘ " : w.ratio > 1 / (1 + WARN_WITHIN) ? "⚠ " : "";
  lines.push(`| ${w.suite} | ${w.arm} | ${w.check} | ${w.bound} ${fmt(w.limit)} | ${fmt(w.measured)} (${w.variant}) | ${flag}${(w.ratio * 100).toFixed(1)}% | ${fmt(Math.min(...values))} – ${fmt(Math.max(...values))} |`);
}
// One bound's clean value per arm and variant: where the variants part (docs/findings-cpu.md).
const matrixBound = flags["matrix-bound"];
const matrixRows = [...worst.values()].filter((w) => w.bound === matrixBound).sort((a, b) => a.suite.localeCompare(b.suite) || a.arm.localeCompare(b.arm));
if (matrixRows.length > 0) {
  lines.push("", `${matrixBound}, clean, per arm and variant:`, "", `| suite | arm | bound | ${variants.join(" | ")} |`, `|---|---|---|${variants.map(() => "---").join("|")}|`);
  for (const w of matrixRows) lines.push(`| ${w.suite} | ${w.arm} | ${fmt(w.limit)} | ${variants.map((v) => (w.values[v] === undefined ? "—" : fmt(w.values[v]))).join(" | ")} |`);
}
lines.push("", notPassed.length === 0 ? "Every required verdict of every clean run passed." : "Required verdicts that did not pass in a clean run:", "");
for (const n of notPassed) lines.push(`- ${n.variant}: ${n.suite} / ${n.arm} / ${n.check}: ${n.status.toUpperCase()} — ${n.summary}`);
lines.push("", "Runs:", "", ...runs.map((r) => `- ${r.variant}: exit ${r.exit}, ${r.seconds.toFixed(0)} s (${r.run})`));

writeFileAtomicSync(join(outDir, "spread.json"), `${JSON.stringify({ variants, suites, runs, notPassed, worst: [...worst.values()] }, null, 2)}\n`);
writeFileAtomicSync(join(outDir, "spread.md"), `${lines.join("\n")}\n`);
console.log(lines.join("\n"));
process.exit(notPassed.length === 0 ? 0 : 1);
