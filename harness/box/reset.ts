import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { forceStop, trackChild } from "../sut/child-process.js";
import type { ResetRecord } from "../results/legs.js";

const OUTPUT_LINES_KEPT = 50;

/** Runs the reset command (argv, no shell) with the box's environment, bounded by `timeoutS`; never throws. */
export async function runReset(command: readonly string[], timeoutS: number, env: Readonly<Record<string, string>>, when: ResetRecord["when"]): Promise<ResetRecord> {
  const started = Date.now();
  const output: string[] = [];
  const keep = (line: string) => {
    output.push(line);
    if (output.length > OUTPUT_LINES_KEPT) output.shift();
  };
  const child = trackChild(spawn(command[0], command.slice(1), { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } }));
  createInterface({ input: child.stdout! }).on("line", keep);
  createInterface({ input: child.stderr! }).on("line", keep);
  let timedOut = false;
  const timer = setTimeout(() => { timedOut = true; forceStop(child, "SIGKILL"); }, timeoutS * 1000);
  const { code, signal } = await new Promise<{ code: number | null; signal: string | null }>((resolve) => {
    child.once("error", (error) => { keep(`cannot run the reset command: ${error.message}`); resolve({ code: null, signal: null }); });
    // 'close', not 'exit': every line it wrote has been read by then.
    child.once("close", (exitCode, exitSignal) => resolve({ code: exitCode, signal: exitSignal }));
  });
  clearTimeout(timer);
  return { when, command: [...command], exit_code: code, signal, duration_ms: Date.now() - started, timed_out: timedOut, output, ok: code === 0 && !timedOut };
}
