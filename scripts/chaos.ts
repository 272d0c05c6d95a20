/**
 * npm run chaos — `bench run` killed at a random moment, K times, and what it leaves checked.
 *
 * Each run is a short parity16 battery (an in-process llama.cpp arm and our server over HTTP, or a
 * runner-protocol arm) killed once at a random moment inside its calibrated length: SIGINT,
 * SIGTERM or SIGKILL to the harness itself, or SIGKILL to the server or the runner it started.
 * Afterwards: the exit code is 2 unless the kill came after the last check (then the honest
 * verdict; a server or runner killed then still dies of a signal the harness did not send, which
 * fails its arm: 2), and always the one summary.json records; summary.json is schema-valid and never claims
 * more than was done; every cell in cells.jsonl is whole and counted; every process the run
 * started is gone and every port it listened on is free. Exit 0: every run held; 1: one did not.
 *
 * Usage: npm run chaos -- [--runs K] [--seed N] [--keep DIR]
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { cpuSeconds, descendants, listeningPortsByInode, portsListenedBy, processTable } from "../harness/io/procfs.js";
import { SeededRandom } from "../harness/fixtures/seeded-random.js";
import { assertMatchesSchema } from "../harness/io/json-schema.js";
import { SUMMARY_SCHEMA } from "../harness/results/run-directory.js";
import { describeMachine, machineInfo } from "../harness/results/machine.js";

type Target = "harness" | "server" | "runner";
interface Kill { readonly target: Target; readonly signal: NodeJS.Signals }

/** The two batteries: one with our server as a child, one with a runner-protocol child. */
const BATTERIES = {
  server: ["--suite", "parity16", "--arm", "F32", "--arm", "server F32", "--prompt", "0"],
  runner: ["--suite", "parity16", "--runner", "python3 {bench}/harness/oracle/float64/reference_forward.py {model}", "--prompt", "0"],
} as const;
const KILLS: readonly (Kill & { readonly battery: keyof typeof BATTERIES })[] = [
  { battery: "server", target: "harness", signal: "SIGINT" },
  { battery: "server", target: "harness", signal: "SIGTERM" },
  { battery: "server", target: "harness", signal: "SIGKILL" },
  { battery: "server", target: "server", signal: "SIGKILL" },
  { battery: "runner", target: "runner", signal: "SIGKILL" },
  { battery: "runner", target: "harness", signal: "SIGKILL" },
  { battery: "runner", target: "harness", signal: "SIGINT" },
];

function option(argv: readonly string[], name: string): string | undefined {
  const at = argv.indexOf(name);
  return at < 0 ? undefined : argv[at + 1];
}

/**
 * The harness counts as started once it has used 0.2 s of CPU: Node's own bootstrap (~0.06 s of
 * CPU) runs before any line of bench, and a signal then meets Node's default, not our handlers;
 * loading the CLI takes ~0.7 s more, so kills while it loads are still in the window.
 */
const HARNESS_STARTED_CPU_S = 0.2;

interface RunOutcome {
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly lengthMs: number;
  readonly killedAtMs: number | undefined;
  readonly killed: boolean;
  /** Every process the run started, and every port they listened on, seen while it ran. */
  readonly children: Map<number, string>;
  readonly ports: Set<number>;
  /** When each kill target was first and last seen alive (the harness: started, as above), in ms from the start. */
  readonly lifetimeMs: Map<Target, [number, number]>;
}

/** How a child kill target is recognised in the process table. */
const CHILD_PATTERNS: Readonly<Record<Exclude<Target, "harness">, RegExp>> = { server: / serve /, runner: /reference_forward\.py/ };

/** One `bench run`, watched every 50 ms; `kill` (if any) lands `afterMs` after its target first lives. */
async function benchRun(battery: readonly string[], runsDir: string, runId: string, kill?: Kill & { afterMs: number }): Promise<RunOutcome> {
  const started = Date.now();
  const child = spawn(process.execPath, [join(PACKAGE_ROOT, "bin", "bench.js"), "run", ...battery, "--runs-dir", runsDir, "--run-id", runId, "--shutdown-grace", "5"],
    { cwd: PACKAGE_ROOT, stdio: "ignore", env: { ...process.env, CI: "1", NO_COLOR: "1" } });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  const children = new Map<number, string>();
  const ports = new Set<number>();
  const lifetimeMs = new Map<Target, [number, number]>();
  let killedAtMs: number | undefined;
  let done = false;
  void exited.then(() => { done = true; });
  while (!done) {
    const table = processTable();
    const listening = listeningPortsByInode();
    const nowMs = Date.now() - started;
    if (lifetimeMs.has("harness") || cpuSeconds(child.pid!) >= HARNESS_STARTED_CPU_S) lifetimeMs.set("harness", [lifetimeMs.get("harness")?.[0] ?? nowMs, nowMs]);
    for (const pid of descendants(child.pid!, table)) {
      children.set(pid, table.get(pid)!.cmdline);
      for (const port of portsListenedBy(pid, listening)) ports.add(port);
      for (const [target, pattern] of Object.entries(CHILD_PATTERNS)) {
        if (pattern.test(table.get(pid)!.cmdline)) lifetimeMs.set(target as Target, [lifetimeMs.get(target as Target)?.[0] ?? nowMs, nowMs]);
      }
    }
    const bornMs = kill === undefined ? undefined : lifetimeMs.get(kill.target)?.[0];
    if (kill !== undefined && killedAtMs === undefined && bornMs !== undefined && nowMs >= bornMs + kill.afterMs) {
      const victim = kill.target === "harness" ? child.pid!
        : descendants(child.pid!, table).find((pid) => CHILD_PATTERNS[kill.target as Exclude<Target, "harness">].test(table.get(pid)!.cmdline));
      if (victim !== undefined) {
        try { process.kill(victim, kill.signal); killedAtMs = Date.now() - started; } catch { /* it ended just now */ }
      }
    }
    await sleep(50);
  }
  const { code, signal } = await exited;
  return { exitCode: code, signal, lengthMs: Date.now() - started, killedAtMs, killed: killedAtMs !== undefined, children, ports, lifetimeMs };
}

/** Problems with what one run left behind; empty when it held. */
async function inspect(outcome: RunOutcome, kill: Kill, runDirectory: string): Promise<string[]> {
  const problems: string[] = [];
  // Orphans: each process the run started must be gone within 15 s of its end (a server drains first).
  const deadline = Date.now() + 15_000;
  let alive: number[] = [];
  do {
    const table = processTable();
    alive = [...outcome.children.keys()].filter((pid) => table.has(pid) && table.get(pid)!.cmdline === outcome.children.get(pid));
    if (alive.length > 0) await sleep(100);
  } while (alive.length > 0 && Date.now() < deadline);
  for (const pid of alive) problems.push(`orphan: pid ${pid} (${outcome.children.get(pid)}) outlived the run`);
  const stillListening = new Set(listeningPortsByInode().values());
  for (const port of outcome.ports) if (stillListening.has(port)) problems.push(`port ${port} is still held after the run`);

  const summaryPath = join(runDirectory, "summary.json");
  const harnessKilledHard = kill.target === "harness" && kill.signal === "SIGKILL" && outcome.killed;
  if (!existsSync(summaryPath)) {
    // Only a run killed before it wrote anything may have no summary; and then it must not have claimed an exit code.
    if (!(harnessKilledHard || outcome.exitCode === 2)) problems.push(`no summary.json, exit ${outcome.exitCode}`);
    return problems;
  }
  let summary: { status: string; exit_code: number | null; cells: number; verdicts: { status: string }[] };
  try {
    summary = assertMatchesSchema(JSON.parse(readFileSync(summaryPath, "utf8")), SUMMARY_SCHEMA, summaryPath);
  } catch (error) {
    problems.push(`summary.json is not schema-valid: ${(error as Error).message}`);
    return problems;
  }
  const cellsPath = join(runDirectory, "cells.jsonl");
  const lines = existsSync(cellsPath) ? readFileSync(cellsPath, "utf8").split("\n").filter((l) => l !== "") : [];
  const whole = lines.filter((line) => { try { JSON.parse(line); return true; } catch { return false; } }).length;
  if (whole !== lines.length) problems.push(`cells.jsonl holds ${lines.length - whole} half-written line(s)`);
  if (harnessKilledHard) {
    // No handler runs after SIGKILL: the record must still be honest (never "complete" unless it was) and keep what was written.
    if (summary.cells > whole) problems.push(`summary.json counts ${summary.cells} cells, cells.jsonl holds ${whole}`);
    if (summary.status === "complete" && outcome.killedAtMs! < outcome.lengthMs - 1000) problems.push("summary.json says complete, but the run was killed before it finished");
    return problems;
  }
  if (summary.cells !== whole) problems.push(`summary.json counts ${summary.cells} cells, cells.jsonl holds ${whole}: finished cells lost`);
  if (outcome.exitCode !== summary.exit_code) problems.push(`exit ${outcome.exitCode}, summary.json records ${summary.exit_code}`);
  const cutShort = summary.status !== "complete" || summary.verdicts.some((v) => v.status === "error");
  if (cutShort && outcome.exitCode !== 2) problems.push(`the run was cut short (status ${summary.status}) but exited ${outcome.exitCode}, not 2`);
  if (!cutShort && outcome.exitCode === 2) problems.push("exit 2 for a run whose every check finished");
  if (summary.status === "running") problems.push("summary.json still says running after the harness ended by itself");
  return problems;
}

async function chaos(argv: readonly string[]): Promise<number> {
  const runs = Number(option(argv, "--runs") ?? "14");
  const seed = Number(option(argv, "--seed") ?? "1");
  if (!Number.isInteger(runs) || runs < 1 || !Number.isInteger(seed)) {
    console.error("usage: npm run chaos -- [--runs K] [--seed N] [--keep DIR]");
    return 2;
  }
  const keep = option(argv, "--keep");
  const runsDir = keep ?? mkdtempSync(join(tmpdir(), "bench-chaos-"));
  const random = new SeededRandom(seed);
  try {
    // Calibration: each battery once, unkilled, for its honest verdict and when each target lives.
    const lifetimes: Record<string, Map<Target, [number, number]>> = {};
    for (const battery of Object.keys(BATTERIES) as (keyof typeof BATTERIES)[]) {
      const calibration = await benchRun(BATTERIES[battery], runsDir, `calibrate-${battery}`);
      const problems = await inspect(calibration, { target: "harness", signal: "SIGINT" }, join(runsDir, `calibrate-${battery}`));
      console.log(`chaos: calibration ${battery}: exit ${calibration.exitCode} in ${(calibration.lengthMs / 1000).toFixed(1)} s${problems.length === 0 ? "" : `: ${problems.join("; ")}`}`);
      if (problems.length > 0 || calibration.exitCode !== 0) return 1;
      lifetimes[battery] = calibration.lifetimeMs;
    }
    let survived = 0;
    const tally = new Map<string, number>();
    for (let i = 0; i < runs; i++) {
      const kill = KILLS[i % KILLS.length];
      // A random moment in the first half of the target's life as long as it last lived unkilled: on a
      // shared machine a run's length varies, and a kill after the end tests nothing.
      const [firstMs, lastMs] = lifetimes[kill.battery].get(kill.target) ?? [0, 0];
      const afterMs = Math.round(0.5 * random.uniform() * (lastMs - firstMs));
      const runId = `chaos-${i}`;
      const outcome = await benchRun(BATTERIES[kill.battery], runsDir, runId, { ...kill, afterMs });
      const problems = await inspect(outcome, kill, join(runsDir, runId));
      const what = `${kill.signal} to the ${kill.target}`;
      const life = outcome.lifetimeMs.get(kill.target);
      const lived = life === undefined ? "it never appeared" : `it lived ${((life[1] - life[0]) / 1000).toFixed(1)} s`;
      const when = outcome.killed ? `at ${(outcome.killedAtMs! / 1000).toFixed(1)} s of ${(outcome.lengthMs / 1000).toFixed(1)} s` : `(planned ${(afterMs / 1000).toFixed(1)} s into its life, ${lived}: not killed)`;
      console.log(`chaos: run ${i + 1}/${runs}: ${what} ${when}: exit ${outcome.exitCode ?? outcome.signal}, ${outcome.children.size} child process(es), ports ${[...outcome.ports].join(", ") || "none"}: ${problems.length === 0 ? "OK" : `FAIL: ${problems.join("; ")}`}`);
      if (!outcome.killed) lifetimes[kill.battery] = outcome.lifetimeMs;
      if (problems.length === 0) {
        survived++;
        if (outcome.killed) tally.set(what, (tally.get(what) ?? 0) + 1);
      }
    }
    const kills = [...tally].map(([what, n]) => `${n} × ${what}`).join(", ");
    console.log(`chaos: ${survived}/${runs} runs held (${kills}) on ${describeMachine(machineInfo())}, seed ${seed}`);
    return survived === runs ? 0 : 1;
  } finally {
    if (keep === undefined) rmSync(runsDir, { recursive: true, force: true });
  }
}

process.exitCode = await chaos(process.argv.slice(2));
