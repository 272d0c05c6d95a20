import { EXIT, type ExitCode } from "../results/exit-code.js";

let pending: ExitCode = EXIT.pass;

/** Commands report their outcome here; main exits with it once the pipeline is done. */
export function setExitCode(code: ExitCode): void {
  pending = code;
}

export function pendingExitCode(): ExitCode {
  return pending;
}
