import { EXIT, type ExitCode } from "../results/exit-code.js";
import type { StoredRun } from "../results/read-run.js";
import { exitCodeFor } from "../results/verdicts.js";

/** Why a run may not become a baseline. */
export interface BaselineRefusal {
  /** The run's honest exit code: the worse of what it recorded and what its verdicts say. */
  readonly code: ExitCode;
  /** "run ID is complete with exit 1: 2 required verdicts did not pass (1 FAIL, 1 SKIPPED)". */
  readonly reason: string;
}

/**
 * A baseline is the standard later runs are held to, so it is taken only from a run that passed:
 * complete, and every required verdict a pass. Informational failures (a Q4_K arm's distance from
 * F32 goldens) are measurements the baseline ratchets, not reasons to refuse it. The code is
 * recomputed from the verdicts too, so a summary whose exit_code disagrees with them cannot pass.
 * Undefined: the run may be a baseline.
 */
export function baselineRefusal(run: StoredRun): BaselineRefusal | undefined {
  const { summary } = run;
  const fromVerdicts = exitCodeFor(summary.verdicts);
  const code = (summary.status !== "complete" ? EXIT.error : fromVerdicts !== EXIT.pass ? fromVerdicts : summary.exit_code ?? EXIT.error) as ExitCode;
  if (code === EXIT.pass) return undefined;
  const required = summary.verdicts.filter((v) => v.gate === "required" && v.status !== "pass");
  const byStatus = (["fail", "error", "skip"] as const)
    .map((status) => [status, required.filter((v) => v.status === status).length] as const)
    .filter(([, n]) => n > 0)
    .map(([status, n]) => `${n} ${status === "skip" ? "SKIPPED" : status.toUpperCase()}`);
  const what = required.length > 0
    ? `${required.length} required verdict${required.length === 1 ? "" : "s"} did not pass (${byStatus.join(", ")})`
    : summary.verdicts.some((v) => v.gate === "required") ? "its recorded exit code is not 0" : "no required verdict ran";
  return { code, reason: `run ${summary.run_id} is ${summary.status} with exit ${code}: ${what}` };
}
