import { setTimeout as sleep } from "node:timers/promises";
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { BenchError } from "../errors.js";
import { PACKAGE_ROOT } from "../paths.js";
import { DEFAULT_SHUTDOWN_GRACE_S, forceStop, hasExited, sendSignal, stopChild, trackChild } from "./child-process.js";
import { httpCall } from "./http-call.js";
import { onStopped, stopReason, SutStoppedError } from "./with-timeout.js";

/*
 * A server process's lifecycle, apart from talking to it (./http.ts is the SUT over its HTTP API):
 * ours (`bench serve`) started on a free loopback port, any server waited on until /health answers
 * 200 (./server-command.ts starts someone else's), and the shutdown ladder that stops it.
 */

/** A server the harness started itself, and what it saw while it booted. */
export interface ManagedServer {
  readonly child: ChildProcess;
  readonly baseUrl: string;
  /** /health answers in boot order, e.g. [503 "loading model", 200]. */
  readonly bootObservations: readonly { status: number; stage: string | undefined }[];
}

export interface ManagedServerOptions {
  readonly modelPath: string;
  readonly slots: number;
  readonly queue: number;
  readonly contextSize: number;
  readonly threads: number;
  readonly flashAttention: boolean;
  /** `bench serve`'s defaults (F16, 512) when absent: what a production server runs. */
  readonly kvCacheType?: "F32" | "F16";
  readonly batchSize?: number;
  /** On when absent, as `bench serve` runs it. */
  readonly promptCache?: boolean;
  /** Prompt tokens per llama_decode; the batch size when absent. */
  readonly prefillChunk?: number;
  /** `--cache-ram`: MiB of host memory for the prompt cache beyond the slots; `bench serve`'s default when absent. */
  readonly hostCacheMiB?: number;
  /** Speculate greedy requests with this draft model (a path), drafting up to draftMax tokens a step. */
  readonly draftModel?: string;
  readonly draftMax?: number;
  /** `bench serve --trace-steps`: the file the server's step trace goes to (docs/step-trace.md). */
  readonly traceSteps?: string;
  readonly bootTimeoutS: number;
  readonly simulateBootSeconds?: number;
  readonly onProgress?: (message: string) => void;
  /** Told of the server process as soon as it is started (the box keeps its stderr tail per arm). */
  readonly onProcess?: (child: ChildProcess, commandLine: string) => void;
  /** The arm's stop: the boot is given up on at once, the server stopped by the shutdown ladder (`shutdownGraceS`), SutStoppedError. */
  readonly signal?: AbortSignal;
  readonly shutdownGraceS?: number;
}

/** Starts `bench serve` on a free loopback port and waits for /health (boot can take minutes on real hardware). */
export async function startManagedServer(options: ManagedServerOptions): Promise<ManagedServer> {
  const args = [join(PACKAGE_ROOT, "bin", "bench.js"), "serve", "--model", options.modelPath, "--port", "0", "--unvalidated",
    "--slots", String(options.slots), "--queue", String(options.queue), "--context-size", String(options.contextSize), "--threads", String(options.threads),
    "--kv-cache-type", options.kvCacheType ?? "F16", "--batch-size", String(options.batchSize ?? 512),
    "--simulate-boot", String(options.simulateBootSeconds ?? 0), ...(options.flashAttention ? ["--flash-attention"] : []),
    ...(options.promptCache === false ? ["--no-prompt-cache"] : []), ...(options.prefillChunk === undefined ? [] : ["--prefill-chunk", String(options.prefillChunk)]),
    ...(options.hostCacheMiB === undefined ? [] : ["--cache-ram", String(options.hostCacheMiB)]),
    ...(options.draftModel === undefined ? [] : ["--draft-model", options.draftModel, ...(options.draftMax === undefined ? [] : ["--draft-max", String(options.draftMax)])]),
    ...(options.traceSteps === undefined ? [] : ["--trace-steps", options.traceSteps]), "--exit-with-stdin"];
  // stdin is the server's lifeline: we never write to it, and when we die, however, it closes and the server drains and exits.
  const child = trackChild(spawn(process.execPath, args, { stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, CI: "1", NO_COLOR: "1" } }));
  options.onProcess?.(child, "bench serve");
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => { stderr += chunk.toString(); });
  const baseUrl = await new Promise<string>((resolve, reject) => {
    // A server wedged before it listens (no line, no exit) is given up on at the boot timeout, not waited on forever:
    // killed, and the open fails once it has exited (nothing of it outlives the failure).
    let wedged = false;
    const timer = setTimeout(() => {
      wedged = true;
      forceStop(child, "SIGKILL");
    }, options.bootTimeoutS * 1000);
    // A stop (Ctrl-C) does not wait for the line either: the server is asked to stop, and the open fails once it has exited.
    let stopped = false;
    const stopListening = onStopped(options.signal, () => {
      stopped = true;
      clearTimeout(timer);
      void stopServerProcess(child, "the server (bench serve)", options.shutdownGraceS);
    });
    const lines = createInterface({ input: child.stdout! });
    lines.on("line", (line) => {
      const match = /^listening on (http:\/\/\S+)$/.exec(line);
      if (match === null || stopped) return;
      clearTimeout(timer);
      stopListening();
      resolve(match[1]);
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      stopListening();
      reject(stopped
        ? new SutStoppedError("the server (bench serve)", "boot", stopReason(options.signal))
        : wedged
        ? new BenchError(`the server (bench serve) printed no "listening on" line within ${options.bootTimeoutS} s`, { field: "boot_timeout_s", fix: "raise --boot-timeout (boot_timeout_s in the box config), or run `bench serve` by hand to see why" })
        : new BenchError(`the server exited (code ${code}) before listening: ${stderr.trim().split("\n").pop() ?? ""}`, { fix: "run `bench serve` by hand to see why" }));
    });
  });
  const bootObservations = await waitHealthy(child, baseUrl, { label: "the server (bench serve)", bootTimeoutS: options.bootTimeoutS, onProgress: options.onProgress, signal: options.signal, shutdownGraceS: options.shutdownGraceS, stderrTail: () => stderr.trim().split("\n").pop() ?? "", fix: "run `bench serve` by hand to see why" });
  return { child, baseUrl, bootObservations };
}

/**
 * Polls /health until it answers 200, recording each distinct answer on the way (the boot stages a
 * conformance check reads). A child that dies, or a boot past the timeout, is a clear error; a stop
 * (`signal`) stops the server by the shutdown ladder and fails with SutStoppedError at once.
 */
export async function waitHealthy(child: ChildProcess, baseUrl: string, options: {
  label: string; bootTimeoutS: number; onProgress?: (message: string) => void; stderrTail: () => string; fix: string; signal?: AbortSignal; shutdownGraceS?: number;
}): Promise<ManagedServer["bootObservations"]> {
  const bootObservations: { status: number; stage: string | undefined }[] = [];
  const deadline = Date.now() + options.bootTimeoutS * 1000;
  for (;;) {
    // A server that accepts and never answers is given up on at the deadline, not waited on forever (its request aborted, no socket left); on a stop, at once.
    const timeout = AbortSignal.timeout(Math.max(1, deadline - Date.now()));
    const health = await httpCall(`${baseUrl}/health`, { signal: options.signal === undefined ? timeout : AbortSignal.any([timeout, options.signal]) }).catch(() => ({ status: 0, text: "{}", headers: {} }));
    // Before the exit check: a Ctrl-C at a terminal reaches the server too, and its death is then the stop's.
    if (options.signal?.aborted === true) {
      await stopServerProcess(child, options.label, options.shutdownGraceS);
      throw new SutStoppedError(options.label, "boot", stopReason(options.signal));
    }
    const stage = healthStage(health.text);
    const last = bootObservations[bootObservations.length - 1];
    if (last === undefined || last.status !== health.status || last.stage !== stage) bootObservations.push({ status: health.status, stage });
    if (health.status === 200) return bootObservations;
    if (hasExited(child)) throw new BenchError(`the server exited (${child.signalCode ?? `code ${child.exitCode}`}) while booting: ${options.stderrTail()}`, { fix: options.fix });
    options.onProgress?.(`waiting for the server to boot: ${stage ?? health.status}`);
    if (Date.now() > deadline) {
      forceStop(child, "SIGKILL");
      throw new BenchError(`the server did not become healthy within ${options.bootTimeoutS} s (last stage: ${stage ?? "none"})`, { field: "boot_timeout_s", fix: "raise the boot timeout, or check the server's log" });
    }
    await sleep(50, undefined, { signal: options.signal }).catch(() => undefined);
  }
}

/** The boot stage a /health body names: ours says `stage`, llama.cpp's server an error message while it loads. */
function healthStage(text: string): string | undefined {
  try {
    const body = JSON.parse(text || "{}") as { stage?: unknown; error?: { message?: unknown } };
    if (typeof body.stage === "string") return body.stage;
    return typeof body.error?.message === "string" ? body.error.message : undefined;
  } catch {
    return text.slice(0, 60);
  }
}

/** A server's shutdown ladder: SIGTERM (it drains), up to `graceS` seconds, then SIGTERM and SIGKILL (stopChild). */
function stopServerProcess(child: ChildProcess, what: string, graceS = DEFAULT_SHUTDOWN_GRACE_S, onWarning?: (message: string) => void): Promise<void> {
  return stopChild(child, { ask: () => sendSignal(child, "SIGTERM"), graceS, what, onWarning });
}

/**
 * SIGTERM (the server drains), then the shutdown ladder. A server that already died (kill -9 leaves
 * exitCode null and signalCode set) is simply gone: waiting for its 'exit' again would wait forever.
 */
export async function stopManagedServer(server: ManagedServer, graceS = DEFAULT_SHUTDOWN_GRACE_S, onWarning?: (message: string) => void): Promise<void> {
  await stopServerProcess(server.child, "the server", graceS, onWarning);
}
