import { Bench } from "tinybench";
import { describeMachine, machineInfo } from "../harness/results/machine.js";
import { RunDirectory } from "../harness/results/run-directory.js";
import { runBattery } from "../harness/runner/run.js";

/**
 * Runs the harness task and its raw node-llama-cpp baseline in one tinybench session (same process,
 * same warm caches), prints the machine and the table, and returns the median ratio harness/raw.
 */
export async function sideBySide(
  harness: { readonly name: string; readonly run: () => Promise<void> },
  raw: { readonly name: string; readonly run: () => Promise<void> },
  options: { readonly iterations: number; readonly note?: string },
): Promise<{ harnessMs: number; rawMs: number; ratio: number }> {
  const bench = new Bench({ iterations: options.iterations, time: 0, warmupIterations: 1 });
  bench.add(harness.name, harness.run).add(raw.name, raw.run);
  await bench.run();
  const [harnessLatency, rawLatency] = bench.tasks.map((task) => {
    if (task.result.state !== "completed") throw new Error(`${task.name}: ${task.result.state}`);
    return task.result.latency;
  });
  console.log(`machine: ${describeMachine(machineInfo())}${options.note === undefined ? "" : `; ${options.note}`}`);
  console.table(bench.table());
  const harnessMs = harnessLatency.p50!;
  const rawMs = rawLatency.p50!;
  return { harnessMs, rawMs, ratio: harnessMs / rawMs };
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
    await runBattery({ suites: [suite], arms }, recorder, recorder.record);
  };
}

/** Arms the embedded SUT runs in-process, and arms that go through our server (own process, HTTP): raw node-llama-cpp can only stand in for the work of each, not the server's boot and transport. */
export function armsBySut<Arm extends { readonly sut?: string }>(arms: readonly Arm[]): { embedded: Arm[]; server: Arm[] } {
  return { embedded: arms.filter((arm) => arm.sut === undefined || arm.sut === "llamacpp"), server: arms.filter((arm) => arm.sut === "http") };
}
