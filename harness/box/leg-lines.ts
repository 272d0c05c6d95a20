import type { LegRecord } from "./leg.js";
import { describeReset } from "./reset.js";

/**
 * The legs worth a line in a report: each reset (command, outcome, duration) and each piece of
 * failure evidence, with where the kept stderr is. Legs with neither say nothing.
 */
export function legLines(legs: readonly LegRecord[]): string[] {
  const lines: string[] = [];
  for (const leg of legs) {
    const who = `${leg.suite} / ${leg.arm}`;
    for (const reset of leg.resets) lines.push(`${who}: reset ${reset.when} the arm: ${describeReset(reset)}`);
    const stderr = leg.stderr_file === null ? "" : ` (stderr: ${leg.stderr_file})`;
    for (const evidence of leg.evidence) lines.push(`${who}: ${evidence.summary}${stderr}`);
  }
  return lines;
}
