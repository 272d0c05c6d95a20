import type { ChildProcess } from "node:child_process";
import { join } from "node:path";
import { writeFileAtomic } from "../io/atomic-write.js";
import type { RunDirectory } from "../results/run-directory.js";
import type { GateVerdict, RunListener } from "../results/types.js";
import type { GateLevel } from "../suites/parity-suite.js";
import { hasExited, ownFatalSignal, wasForced } from "../sut/child-process.js";
import { setTimeout as sleep } from "node:timers/promises";
import { ArmStopped } from "../sut/with-timeout.js";
import { armKey, type BatteryArm } from "../suites/shard.js";
import type { BoxSettings } from "./config.js";
import { DeviceLock, formatDuration } from "./device-lock.js";
import { findEvidence } from "./evidence.js";
import { runReset } from "./reset.js";
import { describeReset, type Evidence, type LegProcess, type LegRecord, type ResetRecord } from "../results/legs.js";

/** Whether an arm's SUT is a device: a runner command or a kernel plugin (the harness cannot tell a CPU one from a board's). */
export function isDeviceArm(arm: object): boolean {
  const a = arm as { sut?: string; runner?: unknown; plugin?: unknown };
  return a.sut === "stdio" || a.runner !== undefined || a.plugin !== undefined;
}

const MAX_LINE_CHARS = 2000;
/** How long a leg waits for an exited process's stderr to drain. */
const STDERR_DRAIN_MS = 2000;

/** A command line short enough for a one-line reason (the kept processes list has it whole). */
const shorten = (command: string) => (command.length > 100 ? `${command.slice(0, 99)}…` : command);

/** A process's stderr, the last `keep` lines of it. */
class StderrTail {
  readonly lines: string[] = [];
  private partial = "";
  constructor(private readonly keep: number) {}
  add(chunk: string): void {
    const parts = (this.partial + chunk).split("\n");
    this.partial = parts.pop() ?? "";
    for (const line of parts) this.push(line);
  }
  finish(): void {
    if (this.partial !== "") this.push(this.partial);
    this.partial = "";
  }
  private push(line: string): void {
    this.lines.push(line.length > MAX_LINE_CHARS ? `${line.slice(0, MAX_LINE_CHARS)} …` : line);
    if (this.lines.length > this.keep) this.lines.shift();
  }
}

/**
 * The box around a run's arms: the device lock (taken before the first device leg, held to the end
 * of the run), the reset before each device leg and after one whose process had to be killed, the
 * leg timeout, and the evidence each leg leaves.
 */
export class BoxSession {
  private lock: DeviceLock | undefined;
  private legs = 0;
  /** Each leg's number in the battery's order, once the run has dealt its legs. */
  private numbers: ReadonlyMap<string, number> | undefined;

  constructor(readonly settings: BoxSettings, private readonly recorder: RunDirectory, readonly emit: RunListener, private readonly runSignal: AbortSignal) {}

  /** Numbers the run's legs in the battery's order, so that a leg's files are named alike however its suite was scheduled (--jobs). */
  numberLegs(legs: readonly BatteryArm[]): void {
    this.numbers = new Map(legs.map((leg, i) => [armKey(leg), i + 1]));
  }

  /** Before an arm: the lock and a reset for a device arm. A failed reset is returned: the arm is not run on a board in an unknown state. */
  async beginLeg(suite: string, arm: { readonly label: string; readonly gate: GateLevel }): Promise<Leg> {
    const device = isDeviceArm(arm);
    if (device) await this.takeLock();
    const number = this.numbers?.get(armKey({ suite, arm: arm.label })) ?? ++this.legs;
    const leg = new Leg(this, suite, arm, device, number, this.runSignal);
    if (device && this.settings.reset !== undefined) await leg.reset("before");
    return leg;
  }

  private async takeLock(): Promise<void> {
    const lock = this.settings.lock;
    if (lock === undefined || this.lock !== undefined) return;
    let lastLineS = -Infinity;
    this.lock = await DeviceLock.acquire(lock.path, lock.timeoutS, process.argv.slice(1).join(" "), (wait) => {
      const line = `waiting for the device lock ${lock.path}: held by ${wait.holder}; waited ${formatDuration(wait.waitedS)} of ${formatDuration(wait.timeoutS)}`;
      void this.emit({ kind: "progress", message: line });
      // CI logs are line-oriented: a line when the wait begins, then one a minute.
      if (wait.waitedS - lastLineS >= 60) {
        lastLineS = wait.waitedS;
        void this.emit({ kind: "notice", message: line });
      }
    }, this.runSignal);
    this.recorder.provenance.lock = { path: lock.path, waited_ms: this.lock.waitedMs };
    if (this.lock.waitedMs >= 1000) await this.emit({ kind: "notice", message: `took the device lock ${lock.path} after ${formatDuration(this.lock.waitedMs / 1000)}` });
  }

  async close(): Promise<void> {
    await this.lock?.release();
    this.lock = undefined;
  }

  /** @internal Legs record themselves here; returns where the stderr tails were written (relative to the run directory). */
  async record(leg: LegRecord, stderr: string | undefined, index: number): Promise<string | null> {
    let stderrFile: string | null = null;
    if (stderr !== undefined) {
      stderrFile = join("legs", `${String(index).padStart(2, "0")}-${slug(leg.suite)}-${slug(leg.arm)}.stderr.log`);
      await writeFileAtomic(join(this.recorder.directory, stderrFile), stderr);
    }
    this.recorder.provenance.legs.push({ ...leg, stderr_file: stderrFile });
    return stderrFile;
  }
}

/** What a terminal or a CI runner sends a whole process group to stop it. */
const STOP_SIGNALS: ReadonlySet<NodeJS.Signals> = new Set(["SIGINT", "SIGTERM", "SIGHUP"]);
/** Stderr lines an arm's crash verdict quotes (the whole tail is in the leg's stderr file). */
const CRASH_TAIL_LINES = 3;

/** The arm verdict's reason for a crashed process: the signal, its last words, and where the rest of its stderr is. */
function crashReason(child: ChildProcess, command: string, stderr: readonly string[], stderrFile: string | null): string {
  const last = stderr.filter((line) => line.trim() !== "").slice(-CRASH_TAIL_LINES).map((line) => line.trim().slice(0, 300));
  const words = last.length === 0 ? "its stderr was empty" : `its stderr ended: ${last.join(" | ")}${stderrFile === null ? "" : ` (the rest: ${stderrFile})`}`;
  return `${shorten(command)} died of ${child.signalCode}, a signal the harness did not send: a crash fails the arm even after its last answer; ${words}`;
}

const slug = (text: string) => text.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "") || "arm";

export class Leg {
  private readonly controller = new AbortController();
  /** The arm's signal: the run's stop, or this leg's timeout. */
  readonly signal: AbortSignal;
  private readonly processes: { child: ChildProcess; command: string; tail: StderrTail }[] = [];
  private readonly resets: ResetRecord[] = [];
  /** Why each runner restart of the arm happened (harness/sut/restarting-runner.ts). */
  private readonly restarts: string[] = [];
  private readonly started = new Date();
  private timer: NodeJS.Timeout | undefined;
  private timedOut = false;
  /** Set when the reset before the arm failed: the arm must not run. */
  failedReset: ResetRecord | undefined;

  constructor(private readonly box: BoxSession, readonly suite: string, readonly arm: { readonly label: string; readonly gate: GateLevel }, readonly device: boolean, private readonly index: number, private readonly runSignal: AbortSignal) {
    this.signal = AbortSignal.any([runSignal, this.controller.signal]);
  }

  /** What the arm's SUT is opened with: where its processes are reported, and their environment. */
  get sutHooks(): { readonly onProcess: (child: ChildProcess, command: string) => void; readonly env: Readonly<Record<string, string>>; readonly bootTimeoutS: number } {
    return { onProcess: (child, command) => this.watch(child, command), env: this.box.settings.env, bootTimeoutS: this.box.settings.bootTimeoutS };
  }

  private watch(child: ChildProcess, command: string): void {
    const tail = new StderrTail(this.box.settings.stderrLines);
    child.stderr?.on("data", (chunk: Buffer) => tail.add(chunk.toString()));
    child.stderr?.once("end", () => tail.finish());
    this.processes.push({ child, command, tail });
  }

  async reset(when: ResetRecord["when"]): Promise<void> {
    const reset = this.box.settings.reset!;
    const moment = when === "restart" ? "between runners of" : `${when}`;
    await this.box.emit({ kind: "progress", message: `${this.arm.label}: resetting the box (${reset.command.join(" ")}) ${moment} the arm` });
    const record = await runReset(reset.command, reset.timeoutS, this.box.settings.env, when);
    this.resets.push(record);
    if (!record.ok) {
      await this.box.emit({ kind: "notice", message: `${this.arm.label}: the reset ${moment} the arm failed: ${describeReset(record)}` });
      if (when === "before") this.failedReset = record;
    }
  }

  /**
   * Between a runner that stopped answering (already stopped) and the fresh one: the box reset, if
   * one is configured (a hung device call can leave the board wedged), and the restart on record.
   */
  async restartRunner(restart: number, why: string): Promise<void> {
    this.restarts.push(why);
    await this.box.emit({ kind: "notice", message: `${this.arm.label}: restarting its runner (restart ${restart}): ${why}` });
    if (!this.device || this.box.settings.reset === undefined) return;
    await this.reset("restart");
    const reset = this.resets[this.resets.length - 1];
    // A board whose reset failed is in an unknown state: no fresh runner is started on it.
    if (!reset.ok) throw new Error(`the box reset between runners failed: ${describeReset(reset)}`);
  }

  /** Starts the leg's wall-clock limit: once the SUT is up (booting has its own timeout). */
  startClock(): void {
    const limitS = this.box.settings.legTimeoutS;
    if (limitS === undefined) return;
    this.timer = setTimeout(() => {
      this.timedOut = true;
      void this.box.emit({ kind: "notice", message: `${this.arm.label}: timed out after ${limitS} s (leg timeout); stopping it` });
      this.controller.abort(new ArmStopped(`timed out after ${limitS} s (leg timeout)`));
    }, limitS * 1000);
  }

  /**
   * After the SUT is closed: the reset if a process had to be killed (or died by a signal, or the
   * leg timed out), the stderr tail and its evidence into the run directory, and the arm's own
   * verdict when it timed out, could not start for a failed reset, or a process of it crashed.
   */
  async end(): Promise<GateVerdict | undefined> {
    clearTimeout(this.timer);
    // A process that has exited may still have stderr in the pipe: its last words are the evidence.
    await Promise.all(this.processes.filter(({ child }) => hasExited(child) && child.stderr?.readableEnded === false)
      .map(({ child }) => Promise.race([new Promise((resolve) => child.stderr!.once("close", resolve)), sleep(STDERR_DRAIN_MS)])));
    const processes: LegProcess[] = this.processes.map(({ child, command }) => ({ command, pid: child.pid ?? null, exit_code: child.exitCode, signal: child.signalCode, forced: wasForced(child) }));
    const killed = processes.some((p) => p.forced || p.signal !== null);
    if (this.device && this.box.settings.reset !== undefined && this.failedReset === undefined && (killed || this.timedOut)) await this.reset("after");
    const evidence: Evidence[] = [];
    for (const { tail } of this.processes) evidence.push(...findEvidence(tail.lines.join("\n"), this.box.settings.signatures));
    for (const { child, command } of this.processes.filter(({ child }) => child.signalCode !== null)) {
      const own = ownFatalSignal(child) !== undefined;
      const how = own ? `died of ${child.signalCode} (not sent by the harness)`
        : wasForced(child) ? `was killed by ${child.signalCode} from the harness (it did not exit when asked)` : `ended by ${child.signalCode}, which the harness sent to stop it`;
      evidence.push({ kind: "killed_by_signal", summary: `${shorten(command)} ${how}`, source: "process", fields: { signal: child.signalCode!, pid: child.pid ?? -1, by: own ? "other" : "harness" } });
    }
    this.restarts.forEach((why, i) => evidence.push({ kind: "runner_restarted", summary: `runner restarted (${i + 1} of ${this.restarts.length}) after ${why}`, source: "runner restart", fields: { restart: i + 1 } }));
    const limitS = this.box.settings.legTimeoutS;
    if (this.timedOut && limitS !== undefined) evidence.unshift({ kind: "timed_out", summary: `timed out after ${limitS} s (leg timeout)`, source: "leg timeout", fields: { leg_timeout_s: limitS } });
    const stderr = this.processes.filter(({ tail }) => tail.lines.length > 0).map(({ command, child, tail }) => [`== ${command} (pid ${child.pid ?? "?"}), last ${tail.lines.length} lines of stderr`, ...tail.lines].join("\n"));
    const stderrFile = await this.box.record({
      suite: this.suite, arm: this.arm.label, device: this.device, started: this.started.toISOString(), duration_ms: Date.now() - this.started.getTime(),
      timed_out: this.timedOut, resets: this.resets, processes, stderr_file: null, evidence, runner_restarts: this.restarts.length,
    }, stderr.length === 0 ? undefined : `${stderr.join("\n\n")}\n`, this.index);
    const base = { suite: this.suite, arm: this.arm.label, check: "arm" as const, gate: this.arm.gate, status: "error" as const };
    const found = evidence.filter((e) => e.kind !== "timed_out").map((e) => e.summary);
    if (this.failedReset !== undefined) return { ...base, reason: `not run: the box reset before it failed: ${describeReset(this.failedReset)}` };
    if (this.timedOut) return { ...base, reason: [`timed out after ${limitS} s (leg timeout)`, ...found].join("; ") };
    const crashed = this.processes.filter(({ child }) => this.crashed(child));
    if (crashed.length > 0) return { ...base, reason: crashed.map(({ child, command, tail }) => crashReason(child, command, tail.lines, stderrFile)).join("; ") };
    return undefined;
  }

  /**
   * A process that died of a signal the harness did not send crashed, whenever it died: mid-arm,
   * or at teardown after its last answer (memory corruption often shows only as it exits). Once the
   * run is stopped, a SIGINT, SIGTERM or SIGHUP is the stop's (a terminal signals the whole group).
   */
  private crashed(child: ChildProcess): boolean {
    const signal = ownFatalSignal(child);
    return signal !== undefined && !(this.runSignal.aborted && STOP_SIGNALS.has(signal));
  }
}
