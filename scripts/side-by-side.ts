import { Bench } from "tinybench";
import { loadavg } from "node:os";
import { describeMachine, machineInfo } from "../harness/results/machine.js";
import { distribution } from "../harness/stats/distribution.js";
import { RunDirectory } from "../harness/results/run-directory.js";
import { EXIT } from "../harness/results/exit-code.js";
import { exitCodeFor } from "../harness/results/verdicts.js";
import { runBattery } from "../harness/runner/run.js";

/** BENCH_ROUNDS=N overrides a script's number of measured rounds (a loaded machine makes the defaults slow). */
const BENCH_ROUNDS = process.env.BENCH_ROUNDS === undefined ? undefined : Math.max(1, Number.parseInt(process.env.BENCH_ROUNDS, 10) || 1);

/**
 * Runs the harness task and its raw node-llama-cpp baseline in one process (same warm caches), in
 * alternating rounds — harness, raw, harness, raw … after one warm-up round — so a busy stretch of a
 * shared machine slows both sides rather than one; prints the machine, each round's times, and
 * returns the medians and the median ratio harness/raw.
 */
export async function sideBySide(
  harness: { readonly name: string; readonly run: () => Promise<void> },
  raw: { readonly name: string; readonly run: () => Promise<void> },
  options: { readonly iterations: number; readonly note?: string },
): Promise<{ harnessMs: number; rawMs: number; ratio: number }> {
  const harnessRounds: number[] = [];
  const rawRounds: number[] = [];
  const rounds = BENCH_ROUNDS ?? options.iterations;
  for (let round = 0; round <= rounds; round++) {
    // No tinybench warm-up: it would run each task a second time per round; round 0 is the warm-up.
    const bench = new Bench({ iterations: 1, time: 0, warmup: false });
    bench.add(harness.name, harness.run).add(raw.name, raw.run);
    await bench.run();
    const [harnessMs, rawMs] = bench.tasks.map((task) => {
      if (task.result.state !== "completed") throw new Error(`${task.name}: ${task.result.state}`);
      return task.result.latency.mean;
    });
    if (round === 0) continue; // warm-up: model loads, caches
    harnessRounds.push(harnessMs);
    rawRounds.push(rawMs);
  }
  console.log(`machine: ${describeMachine(machineInfo())}, load average ${loadavg()[0].toFixed(1)}${options.note === undefined ? "" : `; ${options.note}`}`);
  console.log(`  ${harness.name}: ${harnessRounds.map((ms) => ms.toFixed(0)).join(" ")} ms`);
  console.log(`  ${raw.name}: ${rawRounds.map((ms) => ms.toFixed(0)).join(" ")} ms`);
  const harnessMs = distribution(harnessRounds)!.median;
  const rawMs = distribution(rawRounds)!.median;
  return { harnessMs, rawMs, ratio: distribution(harnessRounds.map((ms, i) => ms / rawRounds[i]))!.median };
}

/**
 * The harness side of a battery benchmark: `bench run --suite <suite> --arm …` into a fresh run
 * directory under `scratch` each time. The arms are named so the raw side can do exactly their work.
 */
export function batteryTask(suite: string, arms: readonly string[], scratch: string): () => Promise<void> {
  let runNumber = 0;
  return async () => {
    const recorder = new RunDirectory(`run-${runNumber++}`, scratch, [`bench:${suite}`]);
    await recorder.open();
    try {
      await runBattery({ suites: [suite], arms }, recorder, recorder.record);
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
