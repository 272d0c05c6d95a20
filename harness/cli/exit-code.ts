import { CommanderError } from "commander";
import { BenchError } from "../errors.js";
import { EXIT, type ExitCode } from "../results/exit-code.js";
import { killLiveChildren } from "../sut/child-process.js";
import { clearProgress } from "./output.js";

/**
 * How the process ends, decided here and only here. Every way out goes through `end`: the command
 * returned, it threw (or something threw where nobody awaited), a signal, or the event loop emptied
 * while the command still waited on a promise that can never settle (a child that died unseen).
 * Only the first counts as finished; every other way is exit 2, and a run still recording is
 * finalised as interrupted or errored with the reason before the process goes. No child survives.
 */

/** A run that is still recording: how to stop it in order, and how to record that it did not finish. */
export interface UnfinishedRun {
  /** Starts an orderly stop: the run stops at the next check, closes its SUTs (the shutdown ladder) and returns. Without one, a signal ends the run at once. */
  readonly stop?: (signal: NodeJS.Signals) => void;
  /** Writes the run's results as not finished, with the reason. */
  finalise(status: "interrupted" | "error", reason: string): Promise<void>;
  /** The same for an exit that allows no more waiting (synchronous; summary.json only). */
  finaliseNow(status: "interrupted" | "error", reason: string): void;
}

export type Ending =
  | { readonly kind: "returned" }
  | { readonly kind: "threw"; readonly error: unknown }
  | { readonly kind: "signal"; readonly signal: NodeJS.Signals; readonly forced: boolean }
  | { readonly kind: "stalled" };

let reported: ExitCode = EXIT.pass;
let unfinished: UnfinishedRun | undefined;
let orderlyStop: ((signal: NodeJS.Signals) => void) | undefined;
let settled = false;
let stopRequested = false;
let ended = false;

/** Commands report their outcome here (for `bench run`: the code the written verdicts give). */
export function setExitCode(code: ExitCode): void {
  reported = code;
}

/** Registers the run being recorded; the returned function releases it once the command has finalised it itself. */
export function guardRun(run: UnfinishedRun): () => void {
  unfinished = run;
  return () => {
    if (unfinished === run) unfinished = undefined;
  };
}

/** What the first SIGINT/SIGTERM does for a command with an orderly stop of its own (bench serve drains). */
export function onOrderlyStop(stop: (signal: NodeJS.Signals) => void): void {
  orderlyStop = stop;
}

/** The exit code of an ending: only a command that returned, with its run finalised, keeps the code it reported. */
export function exitCodeOf(how: Ending, reportedCode: ExitCode, runStillOpen: boolean): ExitCode {
  if (how.kind === "returned") return runStillOpen ? EXIT.error : reportedCode;
  if (how.kind === "threw" && how.error instanceof CommanderError && how.error.exitCode === 0) return EXIT.pass;
  return EXIT.error;
}

function reasonOf(how: Ending): string {
  switch (how.kind) {
    case "returned": return "the command returned before its run was finalised";
    case "threw": return how.error instanceof BenchError ? how.error.oneLine() : how.error instanceof Error ? how.error.message : String(how.error);
    case "signal": return how.forced ? `${how.signal} again: stopped at once, without waiting for the SUTs to shut down` : `stopped by ${how.signal}`;
    case "stalled": return "the run stopped making progress: it waited on work that can never finish (nothing was left running), so it did not finish";
  }
}

function report(how: Ending): void {
  if (how.kind === "threw") {
    const { error } = how;
    if (error instanceof CommanderError) return;
    if (error instanceof BenchError) process.stderr.write(`bench: error: ${error.oneLine()}\n`);
    else process.stderr.write(`bench: internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  } else if (how.kind !== "returned") {
    process.stderr.write(`bench: ${reasonOf(how)} (exit ${EXIT.error})\n`);
  }
}

/** The one way out. Idempotent: the first ending wins. */
export async function end(how: Ending): Promise<void> {
  if (ended) return;
  ended = true;
  clearProgress();
  report(how);
  const code = exitCodeOf(how, reported, unfinished !== undefined);
  process.exitCode = code;
  killLiveChildren();
  if (unfinished !== undefined) {
    const run = unfinished;
    unfinished = undefined;
    const status = how.kind === "signal" ? "interrupted" : "error";
    await run.finalise(status, reasonOf(how)).catch(() => run.finaliseNow(status, reasonOf(how)));
  }
  if (how.kind !== "returned") process.exit(code);
  // A finished command leaves nothing to wait for; a handle some library left open must not keep it alive.
  setTimeout(() => process.exit(code), 5000).unref();
}

/** The first signal starts the orderly stop of the run or the command, where there is one; otherwise, and the second time, the end. */
function onSignal(signal: NodeJS.Signals): void {
  const stop = unfinished !== undefined ? unfinished.stop : orderlyStop;
  if (stop === undefined || stopRequested) {
    void end({ kind: "signal", signal, forced: stopRequested });
    return;
  }
  stopRequested = true;
  if (unfinished !== undefined) process.stderr.write(`bench: ${signal}: stopping in order, finished results are kept (${signal} again to stop at once)\n`);
  stop(signal);
}

/**
 * Runs a command to its end. The listeners stay for the life of the process: node-llama-cpp's
 * dependencies (signal-exit) re-raise a signal that no other listener holds, which would kill us
 * before results are kept.
 */
export async function runToEnd(work: () => Promise<unknown>): Promise<void> {
  // bin/bench.js's stand-in for the seconds the CLI takes to load: ours take over from here.
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    for (const listener of process.listeners(signal)) if ((listener as { benchWhileLoading?: boolean }).benchWhileLoading === true) process.removeListener(signal, listener);
  }
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  process.on("uncaughtException", (error) => void end({ kind: "threw", error }));
  process.on("unhandledRejection", (error) => void end({ kind: "threw", error }));
  // The event loop emptied while the command still awaits: nothing can settle that promise any more.
  process.on("beforeExit", () => {
    if (!settled) void end({ kind: "stalled" });
  });
  // Last resort for a process.exit() from elsewhere: no orphans, and a run still recording is never left "running" nor 0.
  process.on("exit", (code) => {
    killLiveChildren();
    if (unfinished === undefined) return;
    unfinished.finaliseNow("error", `the process exited (code ${code}) before the run finished`);
    unfinished = undefined;
    if (code === EXIT.pass) process.exitCode = EXIT.error;
  });
  let how: Ending;
  try {
    await work();
    how = { kind: "returned" };
  } catch (error) {
    how = { kind: "threw", error };
  }
  settled = true;
  await end(how);
}
