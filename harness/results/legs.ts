/**
 * What summary.json records of each arm's leg on the box (harness/box/): the resets around it, its
 * processes, and the failure evidence found in their stderr; and the one-line form reports show.
 */

/**
 * One piece of failure evidence of an arm: a signature found in a process's stderr, the signal
 * that killed a process, or the leg timeout. `summary` is the one-line reason the report shows.
 */
export interface Evidence {
  readonly kind: string;
  readonly summary: string;
  /** The signature's name, or "process" / "leg timeout" for evidence the harness saw itself. */
  readonly source: string;
  readonly fields: Readonly<Record<string, number | string>>;
  /** The stderr text the signature matched (absent for evidence not read from a log). */
  readonly matched?: string;
}

/** One run of the box's reset command, as summary.json records it. */
export interface ResetRecord {
  /** Before the arm (every device arm), after it (its process had to be killed, or the arm timed out), or between a runner that stopped answering and its replacement. */
  readonly when: "before" | "after" | "restart";
  readonly command: readonly string[];
  readonly exit_code: number | null;
  readonly signal: string | null;
  readonly duration_ms: number;
  readonly timed_out: boolean;
  /** Its last lines of stdout and stderr, interleaved as they came. */
  readonly output: readonly string[];
  readonly ok: boolean;
}

/** "tt-smi -r 0,1,2,3 exited 1 after 2.3 s: <last line>" */
export function describeReset(reset: ResetRecord): string {
  const how = reset.timed_out ? "timed out" : reset.signal !== null ? `was killed by ${reset.signal}` : `exited ${reset.exit_code}`;
  const last = reset.output[reset.output.length - 1];
  return `${reset.command.join(" ")} ${how} after ${(reset.duration_ms / 1000).toFixed(1)} s${last === undefined ? "" : `: ${last}`}`;
}

/** One process a leg's SUT started (a runner, a plugin host, a server), as summary.json records it. */
export interface LegProcess {
  readonly command: string;
  readonly pid: number | null;
  readonly exit_code: number | null;
  readonly signal: string | null;
  /** The harness had to signal it (it did not exit when asked, or broke the protocol). */
  readonly forced: boolean;
}

/** One arm's leg on the box: its resets, processes, kept stderr and the evidence found in it. */
export interface LegRecord {
  readonly suite: string;
  readonly arm: string;
  /** Its SUT is a runner command or a kernel plugin (a device stands behind it), not the embedded CPU default. */
  readonly device: boolean;
  readonly started: string;
  readonly duration_ms: number;
  readonly timed_out: boolean;
  readonly resets: readonly ResetRecord[];
  readonly processes: readonly LegProcess[];
  /** The kept stderr tail, relative to the run directory (null: no process wrote to stderr). */
  readonly stderr_file: string | null;
  readonly evidence: readonly Evidence[];
  /** Runners started in place of one that stopped answering (absent in runs made before restarts). */
  readonly runner_restarts?: number;
}

/**
 * The legs worth a line in a report: each reset (command, outcome, duration) and each piece of
 * failure evidence, with where the kept stderr is. Legs with neither say nothing.
 */
export function legLines(legs: readonly LegRecord[]): string[] {
  const lines: string[] = [];
  for (const leg of legs) {
    const who = `${leg.suite} / ${leg.arm}`;
    for (const reset of leg.resets) lines.push(`${who}: reset ${reset.when === "restart" ? "between runners" : `${reset.when} the arm`}: ${describeReset(reset)}`);
    const stderr = leg.stderr_file === null ? "" : ` (stderr: ${leg.stderr_file})`;
    for (const evidence of leg.evidence) lines.push(`${who}: ${evidence.summary}${stderr}`);
  }
  return lines;
}
