import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { RUNS_DIR } from "../paths.js";
import { readRun } from "./read-run.js";

export type Validation =
  | { readonly validated: true; readonly run: string; readonly arms: readonly string[] }
  | { readonly validated: false; readonly reason: string };

/**
 * Whether a passing validation run exists for this exact artifact: a complete run that exited 0,
 * with an arm on a model of this sha256 whose required gates all ran and passed. An arm whose
 * gates were all informational validates nothing.
 */
export function findValidation(modelSha256: string, runsDir = RUNS_DIR): Validation {
  const ids = existsSync(runsDir) ? readdirSync(runsDir).filter((id) => existsSync(join(runsDir, id, "summary.json"))).sort().reverse() : [];
  let seen = 0;
  for (const id of ids) {
    let run;
    try {
      run = readRun(join(runsDir, id));
    } catch {
      continue;
    }
    const { summary } = run;
    const arms = summary.suts.filter((s) => s.provenance.modelSha256 === modelSha256);
    if (arms.length === 0) continue;
    seen++;
    if (summary.status !== "complete" || summary.exit_code !== 0) continue;
    const passing = arms.filter((arm) => {
      const required = summary.verdicts.filter((v) => v.suite === arm.suite && v.arm === arm.arm && v.gate === "required");
      return required.length > 0 && required.every((v) => v.status === "pass");
    });
    if (passing.length > 0) return { validated: true, run: summary.run_id, arms: passing.map((a) => `${a.suite}/${a.arm}`) };
  }
  return {
    validated: false,
    reason: seen === 0
      ? `no run in ${runsDir} tested this artifact (sha256 ${modelSha256.slice(0, 12)}…)`
      : `${seen} run(s) tested this artifact (sha256 ${modelSha256.slice(0, 12)}…) but none passed a required gate on it`,
  };
}
