import { loadavg } from "node:os";
import { describeMachine, machineInfo } from "../harness/results/machine.js";
import { distribution } from "../harness/stats/distribution.js";
import { RunDirectory } from "../harness/results/run-directory.js";
import { EXIT } from "../harness/results/exit-code.js";
import { exitCodeFor } from "../harness/results/verdicts.js";
import { runBattery } from "../harness/runner/run.js";
import type { RunOptions } from "../harness/runner/run-options.js";
import { cpuSeconds } from "../harness/io/procfs.js";
import { ownTreeSeconds } from "./quiet-rounds.js";

/** BENCH_ROUNDS=N overrides a script's number of measured rounds (a loaded machine makes the defaults slow). */
const BENCH_ROUNDS = process.env.BENCH_ROUNDS === undefined ? undefined : Math.max(1, Number.parseInt(process.env.BENCH_ROUNDS, 10) || 1);

/**
 * CPU seconds of this process, to the microsecond (process.cpuUsage), and of every process it
 * started (/proc, 10 ms ticks: a goldens round is ~130 ms of CPU, so this process's own share must
 * not be read in ticks).
 */
function treeCpuSeconds(): number {
  const own = process.cpuUsage();
  return (own.user + own.system) / 1e6 + (ownTreeSeconds() - cpuSeconds(process.pid));
}

/** One side's medians over its rounds, and the median of the per-round ratios harness/raw. */
export interface SideBySide {
  readonly harnessMs: number;
  readonly rawMs: number;
  readonly ratio: number;
  /** CPU time of this process and every process it started (servers, tools), so other engineers' load on a shared machine moves it far less than wall time. */
  readonly harnessCpuMs: number;
  readonly rawCpuMs: number;
  readonly cpuRatio: number;
}

/**
 * Runs the harness task and its raw node-llama-cpp baseline in one process (same warm caches), in
 * alternating rounds — harness, raw, harness, raw … after one warm-up round — so a busy stretch of a
 * shared machine slows both sides rather than one; prints the machine, each round's wall and CPU
 * times, and returns the medians and the median ratios harness/raw.
 */
export async function sideBySide(
  harness: { readonly name: string; readonly run: () => Promise<void> },
  raw: { readonly name: string; readonly run: () => Promise<void> },
  options: { readonly iterations: number; readonly note?: string },
): Promise<SideBySide> {
  const wall = { harness: [] as number[], raw: [] as number[] };
  const cpu = { harness: [] as number[], raw: [] as number[] };
  const rounds = BENCH_ROUNDS ?? options.iterations;
  for (let round = 0; round <= rounds; round++) {
    for (const [side, task] of [["harness", harness], ["raw", raw]] as const) {
      const cpuBefore = treeCpuSeconds();
      const started = performance.now();
      try {
        await task.run();
      } catch (error) {
        throw new Error(`${task.name}: ${error instanceof Error ? error.message : String(error)}`);
      }
      const wallMs = performance.now() - started;
      const cpuMs = (treeCpuSeconds() - cpuBefore) * 1000;
      if (round === 0) continue; // warm-up: model loads, caches
      wall[side].push(wallMs);
      cpu[side].push(cpuMs);
    }
  }
  const rounded = (values: readonly number[]) => values.map((ms) => ms.toFixed(0)).join(" ");
  console.log(`machine: ${describeMachine(machineInfo())}, load average ${loadavg()[0].toFixed(1)}${options.note === undefined ? "" : `; ${options.note}`}`);
  console.log(`  ${harness.name}: wall ${rounded(wall.harness)} ms; CPU ${rounded(cpu.harness)} ms`);
  console.log(`  ${raw.name}: wall ${rounded(wall.raw)} ms; CPU ${rounded(cpu.raw)} ms`);
  const median = (values: readonly number[]) => distribution(values)!.median;
  return {
    harnessMs: median(wall.harness), rawMs: median(wall.raw), ratio: median(wall.harness.map((ms, i) => ms / wall.raw[i])),
    harnessCpuMs: median(cpu.harness), rawCpuMs: median(cpu.raw), cpuRatio: median(cpu.harness.map((ms, i) => ms / cpu.raw[i])),
  };
}

/**
 * "wall harness/raw 1.042, CPU harness/raw 1.013 (target ≤ 1.10: OK)": both ratios, the target
 * judged on both — wall time is what a user waits for, CPU time what a busy machine disturbs least.
 */
export function describeRatios(result: SideBySide, target?: number): string {
  const cpu = Number.isFinite(result.cpuRatio) && result.rawCpuMs > 0 ? result.cpuRatio.toFixed(3) : "n/a (no /proc)";
  const verdict = target === undefined ? "" : ` (target ≤ ${target.toFixed(2)}: ${result.ratio <= target && !(result.cpuRatio > target) ? "OK" : "OVER TARGET"})`;
  return `wall harness/raw ${result.ratio.toFixed(3)}, CPU harness/raw ${cpu}${verdict}`;
}

/**
 * The harness side of a battery benchmark: `bench run --suite <suite> --arm …` into a fresh run
 * directory under `scratch` each time. The arms (and needle cases, when a selection names them) are
 * named so the raw side can do exactly their work.
 */
export function batteryTask(suite: string, arms: readonly string[], scratch: string, selection: Pick<RunOptions, "niahCases"> = {}): () => Promise<void> {
  let runNumber = 0;
  return async () => {
    const recorder = new RunDirectory(`run-${runNumber++}`, scratch, [`bench:${suite}`]);
    await recorder.open();
    try {
      await runBattery({ suites: [suite], arms, ...selection }, recorder, recorder.record);
    } catch (error) {
      await recorder.flush("error", EXIT.error, error instanceof Error ? error.message : String(error));
      throw error;
    }
    const code = exitCodeFor(recorder.allVerdicts());
    await recorder.flush("complete", code);
    // A battery that did not pass did other work than a passing one: its time is no benchmark.
    if (code !== EXIT.pass) throw new Error(`bench run --suite ${suite} exited ${code} inside the benchmark (run ${recorder.runId} under ${scratch}): fix the run before timing it`);
  };
}

/** Arms the embedded SUT runs in-process, and arms that go through our server (own process, HTTP): raw node-llama-cpp can only stand in for the work of each, not the server's boot and transport. */
export function armsBySut<Arm extends { readonly sut?: string }>(arms: readonly Arm[]): { embedded: Arm[]; server: Arm[] } {
  return { embedded: arms.filter((arm) => arm.sut === undefined || arm.sut === "llamacpp"), server: arms.filter((arm) => arm.sut === "http") };
}
