import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { forceStop, trackChild } from "../sut/child-process.js";

/** One run of the box's reset command, as summary.json records it. */
export interface ResetRecord {
  /** Before the arm (every device arm), or after it (its process had to be killed, or the arm timed out). */
  readonly when: "before" | "after";
  readonly command: readonly string[];
  readonly exit_code: number | null;
  readonly signal: string | null;
  readonly duration_ms: number;
  readonly timed_out: boolean;
  /** Its last lines of stdout and stderr, interleaved as they came. */
  readonly output: readonly string[];
  readonly ok: boolean;
}

const OUTPUT_LINES_KEPT = 50;

/** "tt-smi -r 0,1,2,3 exited 1 after 2.3 s: <last line>" */
export function describeReset(reset: ResetRecord): string {
  const how = reset.timed_out ? "timed out" : reset.signal !== null ? `was killed by ${reset.signal}` : `exited ${reset.exit_code}`;
  const last = reset.output[reset.output.length - 1];
  return `${reset.command.join(" ")} ${how} after ${(reset.duration_ms / 1000).toFixed(1)} s${last === undefined ? "" : `: ${last}`}`;
}

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
