import { existsSync, readdirSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { BenchError } from "../errors.js";
import { latestRunDirectory, readRun, runSummariesNewestFirst, type StoredRun } from "../results/read-run.js";
import type { UnreadableRun } from "./history.js";

/**
 * The runs a report covers, oldest first by the start time each recorded. Arguments are run ids
 * under `runsDir`, run directories, or directories of runs (every run inside); `last` takes the N
 * newest under `runsDir`. A run named explicitly that cannot be read stops the report (exit 2); one
 * found inside a directory or by --last is listed as unreadable instead, so one cut-off run does
 * not hide the history.
 */
export function selectRuns(args: readonly string[], runsDir: string, last: number | undefined): { runs: StoredRun[]; unreadable: UnreadableRun[] } {
  const runs: StoredRun[] = [];
  const unreadable: UnreadableRun[] = [];
  const readFound = (directory: string) => {
    try {
      runs.push(readRun(directory, runsDir));
    } catch (error) {
      if (!(error instanceof BenchError)) throw error;
      unreadable.push({ directory, reason: error.oneLine() });
    }
  };
  for (const arg of args) {
    if (isDirectoryOfRuns(arg)) for (const { directory } of runSummariesNewestFirst(arg)) readFound(directory);
    else runs.push(readRun(arg, runsDir));
  }
  if (last !== undefined) for (const { directory } of runSummariesNewestFirst(runsDir).slice(0, last)) readFound(directory);
  if (args.length === 0 && last === undefined) runs.push(readRun(latestRunDirectory(runsDir), runsDir));
  if (runs.length === 0) throw new BenchError("no readable runs to report on", { file: args[0] ?? runsDir, fix: "pass run ids, run directories or a directory of runs (see `bench report --help`)" });
  // The same run named twice (by id and by path, or also inside a directory given) counts once.
  const unique = [...new Map(runs.map((run) => [resolve(run.directory), run])).values()];
  unique.sort((a, b) => Date.parse(a.summary.started) - Date.parse(b.summary.started) || (a.directory < b.directory ? -1 : 1));
  return { runs: unique, unreadable };
}

function isDirectoryOfRuns(path: string): boolean {
  if (!existsSync(path) || !statSync(path).isDirectory() || existsSync(join(path, "summary.json"))) return false;
  return readdirSync(path).some((name) => existsSync(join(path, name, "summary.json")));
}
