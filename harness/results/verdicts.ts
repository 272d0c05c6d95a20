import { EXIT, type ExitCode } from "./exit-code.js";
import type { GateVerdict } from "./types.js";

export interface VerdictCounts {
  readonly pass: number;
  readonly fail: number;
  readonly skip: number;
  readonly error: number;
  readonly required_failed: number;
  readonly required_skipped: number;
  readonly required_errors: number;
}

export function countVerdicts(verdicts: readonly GateVerdict[]): VerdictCounts {
  const required = verdicts.filter((v) => v.gate === "required");
  return {
    pass: verdicts.filter((v) => v.status === "pass").length,
    fail: verdicts.filter((v) => v.status === "fail").length,
    skip: verdicts.filter((v) => v.status === "skip").length,
    error: verdicts.filter((v) => v.status === "error").length,
    required_failed: required.filter((v) => v.status === "fail").length,
    required_skipped: required.filter((v) => v.status === "skip").length,
    required_errors: required.filter((v) => v.status === "error").length,
  };
}

/**
 * The honest exit code: an error anywhere in a required gate is 2 (the run could not decide),
 * a failed required gate is 1, a required gate that did not run is 77, and only then 0.
 * A run with no required verdict at all did not test anything required: 77.
 */
export function exitCodeFor(verdicts: readonly GateVerdict[]): ExitCode {
  const counts = countVerdicts(verdicts);
  if (counts.required_errors > 0) return EXIT.error;
  if (counts.required_failed > 0) return EXIT.gateFailed;
  if (counts.required_skipped > 0) return EXIT.requiredSkipped;
  if (!verdicts.some((v) => v.gate === "required")) return EXIT.requiredSkipped;
  return EXIT.pass;
}
