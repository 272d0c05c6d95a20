import { EXIT } from "../results/exit-code.js";
import type { RunSummary } from "../results/read-run.js";
import type { Trends, TrendChange } from "./trends.js";

/** A gate of the latest run that did not pass, as the verdict lists it. */
export interface NotPassed {
  readonly gate: "required" | "informational";
  readonly status: "fail" | "error" | "skip";
  readonly what: string;
  readonly why: string;
}

/** The answer the report opens with: the latest run's verdict, what did not pass, and what moved since the run before it. */
export interface LatestVerdict {
  readonly runId: string;
  readonly word: string;
  readonly exitCode: number | null;
  readonly status: string;
  readonly machine: string;
  readonly notPassed: readonly NotPassed[];
  /** The previous run in start-time order, and whether it ran on the same machine (otherwise nothing is compared with it). */
  readonly previous: { readonly runId: string; readonly machine: string; readonly sameMachine: boolean } | null;
  /** Changes of band state that first appeared in the latest run. */
  readonly moved: readonly TrendChange[];
}

const WORDS: Record<number, string> = { [EXIT.pass]: "PASS", [EXIT.gateFailed]: "FAIL", [EXIT.error]: "ERROR", [EXIT.requiredSkipped]: "SKIPPED — NOT A PASS" };

/** Pure: the latest run's summary and the trends of the whole history. */
export function latestVerdict(latest: RunSummary, trends: Trends): LatestVerdict {
  const runs = trends.runs;
  const last = runs[runs.length - 1];
  const before = runs.length >= 2 ? runs[runs.length - 2] : undefined;
  const word = latest.exit_code === null ? "NO VERDICT" : (WORDS[latest.exit_code] ?? `exit ${latest.exit_code}`);
  const notPassed = latest.verdicts.flatMap((v): NotPassed[] => v.status === "pass" ? [] : [{
    gate: v.gate === "required" ? "required" : "informational", status: v.status, what: `${v.suite}/${v.arm}/${v.check}`, why: "summary" in v ? v.summary : v.reason,
  }]);
  // Required first: they decide the exit code.
  notPassed.sort((a, b) => (a.gate === b.gate ? 0 : a.gate === "required" ? -1 : 1));
  return {
    runId: latest.run_id, word: latest.status === "complete" ? word : `${word} (run ${latest.status}${latest.error === undefined ? "" : `: ${latest.error}`})`,
    exitCode: latest.exit_code, status: latest.status, machine: last.machine, notPassed,
    previous: before === undefined ? null : { runId: before.runId, machine: before.machine, sameMachine: before.machine === last.machine },
    moved: trends.changes.filter((c) => c.firstRun === last.runId && c.previousRun !== null),
  };
}
