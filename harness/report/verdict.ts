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

/** A run of the window before the latest that did not pass, with the required gates that did not. */
export interface EarlierNotPassed {
  readonly runId: string;
  readonly word: string;
  readonly exitCode: number | null;
  /** `suite/arm/check` of each required verdict that did not pass (empty: the run stopped, or recorded none). */
  readonly gates: readonly string[];
}

/**
 * The answer the report opens with: the latest run's verdict, what did not pass, every earlier run
 * of the window that did not pass, and what moved since the run before it.
 */
export interface LatestVerdict {
  readonly runId: string;
  readonly word: string;
  readonly exitCode: number | null;
  readonly status: string;
  readonly machine: string;
  readonly notPassed: readonly NotPassed[];
  /** Earlier runs of the window that did not pass, oldest first: a later passing run must not hide them. */
  readonly earlierNotPassed: readonly EarlierNotPassed[];
  /** The previous run in start-time order, and whether it ran on the same machine (otherwise nothing is compared with it). */
  readonly previous: { readonly runId: string; readonly machine: string; readonly sameMachine: boolean } | null;
  /** Changes of band state that first appeared in the latest run. */
  readonly moved: readonly TrendChange[];
}

const WORDS: Record<number, string> = { [EXIT.pass]: "PASS", [EXIT.gateFailed]: "FAIL", [EXIT.error]: "ERROR", [EXIT.requiredSkipped]: "SKIPPED — NOT A PASS" };

function wordOf(summary: RunSummary): string {
  const word = summary.exit_code === null ? "NO VERDICT" : (WORDS[summary.exit_code] ?? `exit ${summary.exit_code}`);
  return summary.status === "complete" ? word : `${word} (run ${summary.status}${summary.error === undefined ? "" : `: ${summary.error}`})`;
}

/** Pure: every run's summary in start-time order (the latest last) and the trends of the whole history. */
export function latestVerdict(summaries: readonly RunSummary[], trends: Trends): LatestVerdict {
  const latest = summaries[summaries.length - 1];
  const runs = trends.runs;
  const last = runs[runs.length - 1];
  const before = runs.length >= 2 ? runs[runs.length - 2] : undefined;
  const notPassed = latest.verdicts.flatMap((v): NotPassed[] => v.status === "pass" ? [] : [{
    gate: v.gate === "required" ? "required" : "informational", status: v.status, what: `${v.suite}/${v.arm}/${v.check}`, why: "summary" in v ? v.summary : v.reason,
  }]);
  // Required first: they decide the exit code.
  notPassed.sort((a, b) => (a.gate === b.gate ? 0 : a.gate === "required" ? -1 : 1));
  const earlierNotPassed = summaries.slice(0, -1).filter((s) => s.exit_code !== EXIT.pass || s.status !== "complete").map((s) => ({
    runId: s.run_id, word: wordOf(s), exitCode: s.exit_code,
    gates: s.verdicts.filter((v) => v.gate === "required" && v.status !== "pass").map((v) => `${v.suite}/${v.arm}/${v.check}`),
  }));
  return {
    runId: latest.run_id, word: wordOf(latest),
    exitCode: latest.exit_code, status: latest.status, machine: last.machine, notPassed, earlierNotPassed,
    previous: before === undefined ? null : { runId: before.runId, machine: before.machine, sameMachine: before.machine === last.machine },
    moved: trends.changes.filter((c) => c.firstRun === last.runId && c.previousRun !== null),
  };
}
