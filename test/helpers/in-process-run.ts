import { RunDirectory } from "../../harness/results/run-directory.js";
import type { GateVerdict } from "../../harness/results/types.js";
import { exitCodeFor } from "../../harness/results/verdicts.js";
import { runBattery } from "../../harness/runner/run.js";
import type { RunOptions } from "../../harness/runner/run-options.js";

/**
 * A `bench run` inside the test's own process: the same battery and run directory (summary.json,
 * cells.jsonl) and the exit code the CLI derives from the verdicts, without a process start (about
 * 1 s of CPU each) — for a planted fault the CLI cannot carry (a SUT wrapper) or many small runs.
 */
export async function runInProcess(runsDir: string, runId: string, options: RunOptions): Promise<{ code: number; verdicts: GateVerdict[]; error: unknown }> {
  const recorder = new RunDirectory(runId, runsDir, ["test"]);
  await recorder.open();
  let error: unknown;
  try {
    await runBattery(options, recorder, recorder.record);
  } catch (e) {
    error = e;
  }
  const code = exitCodeFor(recorder.allVerdicts());
  await recorder.flush("complete", code);
  return { code, verdicts: [...recorder.allVerdicts()], error };
}
