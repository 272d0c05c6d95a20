import { readFileSync } from "node:fs";
import { processTable } from "../../harness/io/procfs.js";
import { setTimeout as sleep } from "node:timers/promises";

/** The pids whose parent is `pid`, from /proc (Linux): the children a CLI run started. */
export function childPids(pid: number): number[] {
  return [...processTable()].filter(([, entry]) => entry.ppid === pid).map(([child]) => child);
}

export function commandLineOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
  } catch {
    return "";
  }
}

/** Whether `pid` still runs (a zombie counts as gone), waiting up to `graceMs` for it to go. */
export async function stillRunning(pid: number, graceMs = 2000): Promise<boolean> {
  const deadline = Date.now() + graceMs;
  for (;;) {
    let state: string | undefined;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      state = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
    } catch {
      state = undefined;
    }
    if (state === undefined || state === "Z") return false;
    if (Date.now() > deadline) return true;
    await sleep(50);
  }
}

/** Polls `probe` every 20 ms until it returns a value, or fails after `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => T | undefined, timeoutMs = 120_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}
