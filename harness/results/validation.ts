import type { Suite } from "../suites/load.js";
import { RUNS_DIR } from "../paths.js";
import { sha256Bytes } from "../io/sha256.js";
import { readFileSync } from "node:fs";
import { runSummariesNewestFirst, type RunSummary } from "./read-run.js";

export type Validation =
  | { readonly validated: true; readonly run: string; readonly arms: readonly string[] }
  | { readonly validated: false; readonly reason: string };

/** Why a run cannot validate anything (the whole battery as configured now, unsubsetted), or undefined when it can. */
export function notAWholeBattery(summary: RunSummary, battery: readonly Suite[]): string | undefined {
  const selection = summary.selection;
  if (selection === undefined) return "it records no selection (not a bench run, or an older harness)";
  const limits = [
    selection.arms.length > 0 ? "--arm" : "", selection.prompts.length > 0 ? "--prompt" : "",
    selection.cases.length > 0 ? "--case" : "", selection.niah_cases.length > 0 ? "--niah-case" : "", (selection.ops?.length ?? 0) > 0 ? "--op" : "",
    selection.shard !== undefined ? `--shard ${selection.shard.index}/${selection.shard.count}` : "",
  ].filter((flag) => flag !== "");
  if (limits.length > 0) return `it was limited by ${limits.join(", ")}`;
  for (const configured of battery) {
    const ran = summary.suites.find((suite) => suite.name === configured.name);
    if (ran === undefined) return `it did not run suite ${configured.name} of the battery`;
    if (ran.sha256 !== sha256Bytes(readFileSync(configured.path))) return `its suite ${configured.name} is not the one configured now (${configured.path})`;
  }
  return undefined;
}

/** How one run bears on one artifact: it validates it, it failed on it, or it says nothing final. */
function verdictOn(summary: RunSummary, modelSha256: string, battery: readonly Suite[]): { readonly kind: "validates"; readonly arms: string[] } | { readonly kind: "failed"; readonly why: string } | { readonly kind: "neutral"; readonly why: string } | undefined {
  const arms = summary.suts.filter((s) => s.provenance.modelSha256 === modelSha256);
  if (arms.length === 0) return undefined;
  const required = summary.verdicts.filter((v) => v.gate === "required" && arms.some((arm) => arm.suite === v.suite && arm.arm === v.arm));
  // A failure always counts against the artifact; an error only in a run that finished (a Ctrl-C abandons checks as errors).
  const broken = required.filter((v) => v.status === "fail" || (v.status === "error" && summary.status === "complete"));
  if (broken.length > 0) return { kind: "failed", why: `run ${summary.run_id} ${broken[0].status === "fail" ? "failed" : "errored"} ${broken[0].suite}/${broken[0].arm}/${broken[0].check} on it` };
  if (summary.status !== "complete" || summary.exit_code !== 0) return { kind: "neutral", why: `run ${summary.run_id} is ${summary.status} with exit ${summary.exit_code}` };
  const incomplete = notAWholeBattery(summary, battery);
  if (incomplete !== undefined) return { kind: "neutral", why: `run ${summary.run_id} passed on it, but ${incomplete}: only a run of its whole battery (${battery.map((suite) => suite.name).join(", ")}) validates` };
  const passing = arms.filter((arm) => {
    const own = required.filter((v) => v.suite === arm.suite && v.arm === arm.arm);
    return own.length > 0 && own.every((v) => v.status === "pass");
  });
  if (passing.length === 0) return { kind: "neutral", why: `run ${summary.run_id} gave it no required gate` };
  return { kind: "validates", arms: passing.map((a) => `${a.suite}/${a.arm}`) };
}

/**
 * Whether this exact artifact is validated: the newest run that says something final about it
 * must be a complete, unsubsetted run of its whole battery (harness/box/batteries.ts: configuration,
 * per model) that exited 0 with its required gates on the artifact all passing. Runs are read newest first by start time; a run that failed or
 * errored a required gate on the artifact after that revokes it, and a passing subset run neither
 * validates nor revokes.
 */
export function findValidation(modelSha256: string, battery: readonly Suite[], runsDir = RUNS_DIR): Validation {
  const short = `sha256 ${modelSha256.slice(0, 12)}…`;
  let notFinal: string | undefined;
  for (const { summary } of runSummariesNewestFirst(runsDir)) {
    if (summary === undefined) continue;
    const verdict = verdictOn(summary, modelSha256, battery);
    if (verdict === undefined) continue;
    if (verdict.kind === "validates") return { validated: true, run: summary.run_id, arms: verdict.arms };
    if (verdict.kind === "failed") return { validated: false, reason: `${verdict.why} (${short}); a failing run revokes any earlier validation` };
    notFinal ??= verdict.why;
  }
  return {
    validated: false,
    reason: notFinal === undefined ? `no run in ${runsDir} tested this artifact (${short})` : `no run validates this artifact (${short}): the newest, ${notFinal}`,
  };
}
