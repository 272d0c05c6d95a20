import type { ChildProcess } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";

/**
 * The processes the harness starts for SUTs (our server, a runner, the plugin host): tracked while
 * alive, and stopped by one bounded ladder. Whatever way the harness ends, it kills what is left
 * here: no path leaves an orphan holding a device or a port.
 */
const live = new Set<ChildProcess>();
/** Children the harness had to signal (SIGTERM or SIGKILL after asking, or after a protocol breach): a device they held may be wedged. */
const forced = new WeakSet<ChildProcess>();
/** Every signal the harness sent each child, to ask it to stop or to force it: a death by any other is the child's own. */
const sent = new WeakMap<ChildProcess, Set<NodeJS.Signals>>();

/** Signals a child and remembers that the harness did, so that dying of it is never read as the child's own crash. */
export function sendSignal(child: ChildProcess, signal: NodeJS.Signals): void {
  const signals = sent.get(child) ?? new Set<NodeJS.Signals>();
  sent.set(child, signals.add(signal));
  child.kill(signal);
}

/** Signals a child the harness gives up on, and remembers it did: the box's reset runs after such an arm. */
export function forceStop(child: ChildProcess, signal: "SIGTERM" | "SIGKILL"): void {
  forced.add(child);
  sendSignal(child, signal);
}

/**
 * The signal a child died of when the harness did not send it (a segfault, an abort, a kill from
 * outside); undefined while it runs, after an exit with a code, or after a signal of the harness's.
 */
export function ownFatalSignal(child: ChildProcess): NodeJS.Signals | undefined {
  const signal = child.signalCode;
  return signal === null || sent.get(child)?.has(signal) === true ? undefined : signal;
}

/** Whether the harness had to signal this child to end it (forceStop). */
export function wasForced(child: ChildProcess): boolean {
  return forced.has(child);
}

export function trackChild<Child extends ChildProcess>(child: Child): Child {
  live.add(child);
  child.once("exit", () => live.delete(child));
  child.once("error", () => live.delete(child));
  return child;
}

/** True once the process is gone, however it went: an exit code, or a signal such as kill -9 (exitCode stays null then). */
export function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/** Resolves true when the child exits within `seconds`, false otherwise. The timer is ref'd: while we wait, the process must not end under us. */
async function exitsWithin(child: ChildProcess, seconds: number): Promise<boolean> {
  if (hasExited(child)) return true;
  const timer = new AbortController();
  const exited = new Promise<boolean>((resolve) => child.once("exit", () => resolve(true)));
  const elapsed = sleep(seconds * 1000, false, { signal: timer.signal }).catch(() => false);
  const result = await Promise.race([exited, elapsed]);
  timer.abort();
  return result || hasExited(child);
}

/** Seconds a SUT process gets to exit after it is asked to (bench run --shutdown-grace). */
export const DEFAULT_SHUTDOWN_GRACE_S = 30;

/** The most a child gets between SIGTERM and SIGKILL. */
const SIGTERM_GRACE_S = 10;

/**
 * The shutdown ladder: `ask` (a runner's shutdown request, a server's SIGTERM drain), then up to
 * `graceS` to exit, then SIGTERM and up to min(graceS, 10 s) (at least 1 s), then SIGKILL. Hard kills can wedge a
 * real device, so each step is said out loud through `onWarning`.
 */
export async function stopChild(child: ChildProcess, options: { readonly ask: () => void; readonly graceS: number; readonly what: string; readonly onWarning?: (message: string) => void }): Promise<void> {
  if (hasExited(child)) return;
  options.ask();
  if (await exitsWithin(child, options.graceS)) return;
  options.onWarning?.(`${options.what} did not exit ${options.graceS} s after it was asked to; sending SIGTERM`);
  forceStop(child, "SIGTERM");
  const termGraceS = Math.min(Math.max(options.graceS, 1), SIGTERM_GRACE_S);
  if (await exitsWithin(child, termGraceS)) return;
  options.onWarning?.(`${options.what} did not exit ${termGraceS} s after SIGTERM; sending SIGKILL`);
  forceStop(child, "SIGKILL");
  await exitsWithin(child, SIGTERM_GRACE_S);
}

/** The tracked children still alive: none once a run has closed its SUTs (tests running a battery in their own process check it). */
export function liveChildCount(): number {
  return [...live].filter((child) => !hasExited(child)).length;
}

/** SIGKILLs every tracked child still alive; synchronous, so it also works from an 'exit' listener. */
export function killLiveChildren(): void {
  for (const child of live) {
    if (!hasExited(child)) child.kill("SIGKILL");
  }
  live.clear();
}
