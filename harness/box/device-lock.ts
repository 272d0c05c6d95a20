import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, rmSync, statSync } from "node:fs";
import { hostname } from "node:os";
import { dirname } from "node:path";
import { createInterface } from "node:readline";
import { BenchError } from "../errors.js";
import { writeFileAtomic } from "../io/atomic-write.js";
import { hasExited, trackChild } from "../sut/child-process.js";

/** What a holder writes next to the lock (`<lock>.holder.json`), so a waiting job can say who it waits for. */
export interface LockHolderNote {
  readonly pid: number;
  /** The flock(1) process that holds the lock for `pid`: /proc/locks names it, not `pid`. */
  readonly helper_pid: number;
  readonly command: string;
  readonly since: string;
  readonly host: string;
}

export interface LockWait {
  readonly waitedS: number;
  readonly timeoutS: number;
  /** Who holds the lock now, in words: pid, command, since when and for how long where known. */
  readonly holder: string;
}

export const holderNotePath = (lockPath: string): string => `${lockPath}.holder.json`;

/** The pid /proc/locks names as holding an exclusive flock on this file (Linux), if any. */
function flockHolderPid(lockPath: string): number | undefined {
  let inode: number;
  let table: string;
  try {
    inode = statSync(lockPath).ino;
    table = readFileSync("/proc/locks", "utf8");
  } catch {
    return undefined;
  }
  for (const line of table.split("\n")) {
    // "1: FLOCK  ADVISORY  WRITE 2403 08:01:1234567 0 EOF"; waiters are listed with "->" and hold nothing.
    const match = /^\d+:\s+FLOCK\s+\S+\s+WRITE\s+(\d+)\s+[0-9a-f]+:[0-9a-f]+:(\d+)\s/i.exec(line);
    if (match !== null && Number(match[2]) === inode) return Number(match[1]);
  }
  return undefined;
}

function commandLineOf(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter((part) => part !== "").join(" ");
  } catch {
    return undefined;
  }
}

function readNote(lockPath: string): LockHolderNote | undefined {
  try {
    return JSON.parse(readFileSync(holderNotePath(lockPath), "utf8")) as LockHolderNote;
  } catch {
    return undefined;
  }
}

/** Whether a pid names a live process (a note left by a holder killed with -9 names a dead one). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** "4 min 12 s" */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/**
 * Who holds the lock, in words. The kernel's lock table names the holding process; a bench run's
 * note names the job behind it (its flock helper is what the table shows) and since when.
 */
export function describeHolder(lockPath: string, now = Date.now()): string {
  const pid = flockHolderPid(lockPath);
  const note = readNote(lockPath);
  if (note !== undefined && (pid === undefined ? isAlive(note.pid) : pid === note.helper_pid || pid === note.pid)) {
    const held = formatDuration((now - Date.parse(note.since)) / 1000);
    return `pid ${note.pid} on ${note.host} (${note.command}) since ${note.since}, for ${held}`;
  }
  if (pid !== undefined) return `pid ${pid} (${commandLineOf(pid) ?? "command unknown"}), which left no holder note`;
  return "a process the lock table does not name (no holder note)";
}

/**
 * An exclusive flock on the box's lock file, held for the rest of the run.
 *
 * Node has no flock, so flock(1) from util-linux holds it: it locks the file, then runs `cat` on a
 * pipe from this process. However this process ends (exit, crash, kill -9) the pipe closes, `cat`
 * sees end-of-file, flock exits and the kernel drops the lock: a crashed holder never wedges the
 * box, and no stale lock file needs clearing (the file itself stays, as flock files do).
 */
export class DeviceLock {
  private constructor(readonly path: string, private readonly helper: ChildProcess, readonly waitedMs: number) {}

  static async acquire(path: string, timeoutS: number, command: string, onWait: (wait: LockWait) => void, signal: AbortSignal): Promise<DeviceLock> {
    if (!existsSync(dirname(path))) throw new BenchError(`the device lock's directory does not exist`, { file: path, field: "device_lock.path", fix: `create ${dirname(path)} (writable by every job on the box) or point device_lock.path elsewhere` });
    const started = Date.now();
    const helper = trackChild(spawn("flock", ["--exclusive", "--close", path, "--command", "echo locked; exec cat"], { stdio: ["pipe", "pipe", "pipe"] }));
    helper.stdin!.on("error", () => undefined);
    let stderr = "";
    helper.stderr!.on("data", (chunk: Buffer) => { stderr += chunk.toString(); });
    let ticker: NodeJS.Timeout | undefined;
    const locked = await new Promise<boolean>((resolve, reject) => {
      const give = (error: BenchError) => { helper.kill("SIGKILL"); reject(error); };
      createInterface({ input: helper.stdout! }).on("line", (line) => { if (line === "locked") resolve(true); });
      helper.once("error", (error) => reject(new BenchError(`cannot run flock(1) to take the device lock: ${error.message}`, { file: path, field: "device_lock.path", fix: "install util-linux (it provides flock)" })));
      helper.once("exit", (code) => reject(new BenchError(`flock(1) could not lock the file (exit ${code}): ${stderr.trim()}`, { file: path, field: "device_lock.path", fix: "make the lock file readable by every job on the box" })));
      signal.addEventListener("abort", () => { helper.kill("SIGKILL"); resolve(false); }, { once: true });
      // Twice a second: who holds it and for how long; at the timeout, give up with the holder named.
      ticker = setInterval(() => {
        const waitedS = (Date.now() - started) / 1000;
        const holder = describeHolder(path);
        if (waitedS >= timeoutS) {
          give(new BenchError(`the device lock is still held after waiting ${formatDuration(timeoutS)}, by ${holder}`, { file: path, field: "device_lock.timeout_s", fix: "wait for that job to end (or stop it), or raise the lock timeout (--lock-timeout)" }));
          return;
        }
        onWait({ waitedS, timeoutS, holder });
      }, 500);
    }).finally(() => clearInterval(ticker));
    if (!locked) throw new BenchError("stopped while waiting for the device lock", { file: path });
    const lock = new DeviceLock(path, helper, Date.now() - started);
    const note: LockHolderNote = { pid: process.pid, helper_pid: helper.pid!, command, since: new Date().toISOString(), host: hostname() };
    await writeFileAtomic(holderNotePath(path), `${JSON.stringify(note, null, 2)}\n`);
    return lock;
  }

  /** Drops the lock (the note first, so no waiter reads a note of a job that no longer holds it). */
  async release(): Promise<void> {
    if (readNote(this.path)?.helper_pid === this.helper.pid) rmSync(holderNotePath(this.path), { force: true });
    if (hasExited(this.helper)) return;
    const exited = new Promise((resolve) => this.helper.once("exit", resolve));
    this.helper.stdin!.end();
    await exited;
  }
}
