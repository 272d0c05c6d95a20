import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { BenchError } from "../errors.js";
import { allocationsFromWire } from "./allocations-wire.js";
import { DEFAULT_SHUTDOWN_GRACE_S, forceStop, stopChild, trackChild } from "./child-process.js";
import { checkHello, parseRunnerLine, readAnswer, RUNNER_METHODS as METHODS, TOKENIZE_SPECIAL_CAPABILITY, type Hello, type RunnerAnswer } from "./runner-lines.js";
import { kernelOutputsFromWire, kernelPairsFromHello, kernelRequestToWire, kernelTimingFromWire, timingPlanToWire } from "./kernel-wire.js";
import { SutGoneError } from "./sut-gone.js";
import { onStopped, stopReason, SutStoppedError } from "./with-timeout.js";
import { UnsupportedRequestError } from "./unsupported.js";
import type { GreedyRequest, KernelRequest, KernelTimingPlan, SpecialTokenOptions, SutProvenance, SystemUnderTest, TeacherForcedRequest, TokenId, TokenKind, TopK, TraceCapture } from "./types.js";

/**
 * The runner protocol (docs/runner-protocol.md): a system under test is any command that speaks
 * JSON lines over stdio. The runner first writes a hello naming the protocol, its version, its
 * engine and the methods it has; the harness then sends `{"id", "method", "params"}` requests one
 * at a time and reads `{"id", "result"}` or `{"id", "error": {"message"}}` (with `"unsupported": true`
 * when the runner has no implementation for what was asked, e.g. a kernel for that tensor type). stdout carries protocol
 * lines only; stderr is the runner's log. `shutdown` (or the end of stdin) asks it to exit.
 * What each line means is read in runner-lines.ts; this file drives the process.
 */
export { RUNNER_PROTOCOL, RUNNER_PROTOCOL_VERSION } from "./runner-lines.js";

export interface StdioSutOptions {
  readonly label: string;
  /** Seconds the runner may take to write its hello (a device boot takes minutes). */
  readonly bootTimeoutS: number;
  /** Seconds the runner gets to exit after the shutdown request, before SIGTERM, then SIGKILL: hard kills can wedge a device. */
  readonly shutdownGraceS?: number;
  readonly onWarning?: (message: string) => void;
  readonly modelPath?: string;
  readonly modelSha256?: string;
  readonly onLog?: (line: string) => void;
  /** Told when the runner process has ended (a crash, or a shutdown): the caller may start a fresh one. */
  readonly onExit?: () => void;
  /** Told of the runner process as soon as it is started (the box keeps its stderr tail and exit status per arm). */
  readonly onProcess?: (child: ChildProcess, commandLine: string) => void;
  /** Added to the runner's environment (bench.config.json `env`). */
  readonly env?: Readonly<Record<string, string>>;
  /** What messages call the process: "runner" (default), or "plugin" for a kernel plugin's host process. */
  readonly role?: "runner" | "plugin";
  /** The arm's stop: the hello is given up on at once and the runner stopped, SutStoppedError. */
  readonly signal?: AbortSignal;
}

/** Keeps the last lines a runner wrote to stderr: the reason it died is usually there. */
const STDERR_LINES_KEPT = 5;

class RunnerProcess {
  private readonly pending = new Map<number, { method: string; resolve: (result: unknown) => void; reject: (error: Error) => void }>();
  private nextId = 1;
  private failure: Error | undefined;
  private readonly stderrTail: string[] = [];
  readonly exited: Promise<void>;
  readonly hello: Promise<Hello>;
  private resolveHello: (hello: Hello) => void = () => undefined;
  /** A failure before the hello rejects it too. */
  private rejectHello: (error: Error) => void = () => undefined;

  constructor(private readonly child: ChildProcess, private readonly commandLine: string, bootTimeoutS: number, onLog?: (line: string) => void, onExit?: () => void, private readonly role: "runner" | "plugin" = "runner") {
    this.hello = new Promise((resolve, reject) => { this.resolveHello = resolve; this.rejectHello = reject; });
    this.hello.catch(() => undefined);
    // Writing to a runner that has died fails here; the exit handler below reports why.
    child.stdin!.on("error", () => undefined);
    const bootTimer = setTimeout(() => this.fail(new BenchError(`the runner wrote no hello within ${bootTimeoutS} s`, { field: "command", fix: `check that \`${this.commandLine}\` speaks the runner protocol (docs/runner-protocol.md)` })), bootTimeoutS * 1000);
    let greeted = false;
    createInterface({ input: child.stdout! }).on("line", (line) => {
      if (this.failure !== undefined || line.trim() === "") return;
      let message: Record<string, unknown>;
      try {
        message = parseRunnerLine(line);
      } catch (error) {
        return this.fail(error as Error);
      }
      if (!greeted) {
        greeted = true;
        clearTimeout(bootTimer);
        try {
          this.resolveHello(checkHello(message));
        } catch (error) {
          this.fail(error as Error);
        }
        return;
      }
      this.answer(readAnswer(message));
    });
    createInterface({ input: child.stderr! }).on("line", (line) => {
      this.stderrTail.push(line);
      if (this.stderrTail.length > STDERR_LINES_KEPT) this.stderrTail.shift();
      onLog?.(line);
    });
    this.exited = new Promise((resolve) => {
      child.once("error", (error) => { this.fail(new BenchError(`cannot start the runner: ${error.message}`, { field: "command", fix: `check the command: ${this.commandLine}` })); resolve(); });
      // 'close', not 'exit': by then every line the runner wrote has been read.
      child.once("close", (code, signal) => {
        clearTimeout(bootTimer);
        const tail = this.stderrTail.length === 0 ? "" : `; its stderr ended: ${this.stderrTail.join(" | ")}`;
        this.fail(new Error(`the ${this.role} exited (${signal ?? `code ${code}`})${tail}`));
        onExit?.();
        resolve();
      });
    });
  }

  private answer(answer: RunnerAnswer): void {
    const waiting = typeof answer.id === "number" ? this.pending.get(answer.id) : undefined;
    if (waiting === undefined) return this.fail(new BenchError(`the runner answered request id ${JSON.stringify(answer.id) ?? "(none)"}, which is not waiting`, { field: "id", fix: "answer each request once, with its id" }));
    this.pending.delete(answer.id as number);
    const reason = `${this.role} ${waiting.method}: `;
    if (answer.kind === "error") waiting.reject(answer.unsupported ? new UnsupportedRequestError(reason + answer.message) : new Error(reason + answer.message));
    else if (answer.kind === "neither") waiting.reject(new Error(`${reason}the answer has neither result nor error`));
    else waiting.resolve(answer.result);
  }

  /** After a protocol breach, an exit or a stop while it boots, every waiting and later request fails with the same reason. */
  fail(error: Error): void {
    if (this.failure !== undefined) return;
    this.failure = error;
    this.rejectHello(error);
    for (const waiting of this.pending.values()) waiting.reject(this.gone());
    this.pending.clear();
    if (this.child.exitCode === null && this.child.signalCode === null) forceStop(this.child, "SIGTERM");
  }

  /** The runner is stopped once it fails: requests then fail with why, as a SutGoneError. */
  private gone(): SutGoneError {
    const failure = this.failure!;
    return new SutGoneError(failure instanceof BenchError ? failure.oneLine() : failure.message);
  }

  call(method: string, params: unknown): Promise<unknown> {
    if (this.failure !== undefined) return Promise.reject(this.gone());
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { method, resolve, reject });
      this.child.stdin!.write(`${JSON.stringify({ id, method, params })}\n`);
    });
  }

  /**
   * The shutdown ladder: a `shutdown` request and the end of stdin, then `graceS` to exit, then
   * SIGTERM, then SIGKILL. The request is never awaited on its own: a runner stuck in a request
   * never reads it.
   */
  async shutdown(graceS: number, onWarning?: (message: string) => void): Promise<void> {
    await stopChild(this.child, {
      ask: () => {
        if (this.failure === undefined) void this.call("shutdown", {}).catch(() => undefined);
        this.child.stdin!.end();
      },
      graceS, what: `the runner (${this.commandLine})`, onWarning,
    });
  }
}

/** Checks a result's shape: a runner's bug becomes a clear error, not a wrong number. */
function field<T>(method: string, result: unknown, name: string, count: number, item: (value: unknown) => value is T): T[] {
  const values = (result as Record<string, unknown> | null)?.[name];
  if (!Array.isArray(values) || values.length !== count || !values.every(item)) {
    throw new Error(`runner ${method}: result.${name} must be an array of ${count} entries (got ${JSON.stringify(values)?.slice(0, 80)})`);
  }
  return values;
}
const isIds = (value: unknown): value is TokenId[] => Array.isArray(value) && value.every((id) => Number.isInteger(id));
/** Greedy and teacher-forced answers are checked one by one against their requests (answer-shape.ts), so one bad answer fails one prompt. */
const checkedLater = <T>(_value: unknown): _value is T => true;

/**
 * A system under test behind the runner protocol: `command` is started once per arm (argv, no
 * shell), its hello says which capabilities it has, and each batch call is one request.
 */
export async function openStdioSut(command: readonly string[], options: StdioSutOptions): Promise<SystemUnderTest> {
  const commandLine = command.join(" ");
  const child = trackChild(spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, ...options.env } }));
  options.onProcess?.(child, commandLine);
  const runner = new RunnerProcess(child, commandLine, options.bootTimeoutS, options.onLog, options.onExit, options.role);
  // A stop while the runner boots does not wait for its hello (a device boot takes minutes): it fails the runner, which is stopped below.
  const stopListening = onStopped(options.signal, () => runner.fail(new SutStoppedError(options.label, "hello", stopReason(options.signal))));
  let hello: Hello;
  try {
    hello = await runner.hello;
  } catch (error) {
    await runner.shutdown(0);
    throw error instanceof BenchError || error instanceof SutStoppedError ? error : new BenchError(`the ${options.role ?? "runner"} did not start: ${(error as Error).message}`, { field: "command", fix: `run \`${commandLine}\` by hand to see why` });
  } finally {
    stopListening();
  }
  const has = (capability: keyof typeof METHODS) => hello.capabilities.includes(METHODS[capability]);
  const call = (capability: keyof typeof METHODS, params: unknown) => runner.call(METHODS[capability], params);
  const wireGreedy = (requests: readonly GreedyRequest[], mode?: "traced") => ({ requests: requests.map((r) => ({ prompt_ids: r.promptIds, max_tokens: r.maxTokens })), ...(mode === undefined ? {} : { mode }) });
  const special = hello.capabilities.includes(TOKENIZE_SPECIAL_CAPABILITY);
  const detokenized = (result: unknown, count: number) => field("detokenize", result, "texts", count, (t): t is string => typeof t === "string");
  const traced = has("greedy") && Array.isArray(hello.modes) && hello.modes.includes("traced");
  const removed = hello.capabilities.filter((method) => (REMOVED_KERNEL_METHODS as readonly string[]).includes(method));
  const provenance: SutProvenance = {
    kind: "stdio",
    engine: `${hello.engine ?? "unnamed runner"} (runner protocol v${hello.version})`,
    settings: { command: commandLine, ...(hello.settings ?? {}), ...(Array.isArray(hello.modes) ? { modes: hello.modes.join(",") } : {}) },
    ...(options.modelPath === undefined ? {} : { modelPath: options.modelPath }),
    ...(options.modelSha256 === undefined ? {} : { modelSha256: options.modelSha256 }),
    ...(typeof hello.model_sha256 === "string" ? { loadedModel: { sha256: hello.model_sha256, file: typeof hello.model_file === "string" ? hello.model_file : "(unnamed)", reportedBy: "the runner's hello" } } : {}),
  };
  return {
    label: options.label,
    provenance,
    ...(has("tokenize") ? { tokenize: async (texts: readonly string[]) => field("tokenize", await call("tokenize", { texts }), "ids", texts.length, isIds) } : {}),
    ...(has("detokenize") ? { detokenize: async (sequences: readonly (readonly TokenId[])[]) => detokenized(await call("detokenize", { sequences }), sequences.length) } : {}),
    ...(has("tokenize") && special ? {
      tokenizeSpecial: async (texts: readonly string[], options: SpecialTokenOptions) =>
        field("tokenize", await call("tokenize", { texts, add_special: options.addSpecial, parse_special: options.parseSpecial }), "ids", texts.length, isIds),
    } : {}),
    ...(has("detokenize") && special ? {
      detokenizeSpecial: async (sequences: readonly (readonly TokenId[])[], options: { readonly renderSpecial: boolean }) =>
        detokenized(await call("detokenize", { sequences, render_special: options.renderSpecial }), sequences.length),
    } : {}),
    ...(has("inspectTokens") ? {
      inspectTokens: async (ids: readonly TokenId[]) =>
        field("inspect_tokens", await call("inspectTokens", { ids }), "kinds", ids.length, (k): k is TokenKind => ["text", "byte", "unknown", "control"].includes(k as string)),
    } : {}),
    ...(has("greedy") ? { greedy: async (requests: readonly GreedyRequest[]) => field("greedy", await call("greedy", wireGreedy(requests)), "ids", requests.length, checkedLater<TokenId[]>) } : {}),
    ...(traced ? { tracedGreedy: async (requests: readonly GreedyRequest[]) => field("greedy", await call("greedy", wireGreedy(requests, "traced")), "ids", requests.length, checkedLater<TokenId[]>) } : {}),
    ...(has("batchedGreedy") ? {
      batchedGreedy: async (requests: readonly GreedyRequest[]) => field("batched_greedy", await call("batchedGreedy", wireGreedy(requests)), "ids", requests.length, checkedLater<TokenId[]>),
    } : {}),
    ...(has("teacherForcedTopK") ? {
      teacherForcedTopK: async (requests: readonly TeacherForcedRequest[]) => {
        const result = await call("teacherForcedTopK", { requests: requests.map((r) => ({ prompt_ids: r.promptIds, continuation_ids: r.continuationIds, k: r.k })) });
        return field("teacher_forced_top_k", result, "top_k", requests.length, checkedLater<TopK[]>);
      },
    } : {}),
    ...(has("traceDemand") ? { traceDemand: async (): Promise<TraceCapture[]> => traceCaptures(await call("traceDemand", {})) } : {}),
    ...(has("allocations") ? { allocations: async () => allocationsFromWire(await call("allocations", {}), "runner allocations") } : {}),
    ...(has("kernel") ? {
      kernelPairs: kernelPairsFromHello(hello.kernel_ops),
      kernel: async (request: KernelRequest) => kernelOutputsFromWire(await call("kernel", kernelRequestToWire(request))),
    } : {}),
    ...(has("kernel") && has("kernelTime") ? {
      kernelTime: async (request: KernelRequest, plan: KernelTimingPlan) => kernelTimingFromWire(await call("kernelTime", { ...kernelRequestToWire(request), timing: timingPlanToWire(plan) })),
    } : {}),
    ...(!has("kernel") && removed.length > 0 ? {
      unsupported: { kernel: `the runner offers ${removed.join(", ")}: these methods of the first kernel suites were replaced by \`kernel\` (one method for every op and encoding; docs/kernel-ops.md)` },
    } : {}),
    close: () => runner.shutdown(options.shutdownGraceS ?? DEFAULT_SHUTDOWN_GRACE_S, options.onWarning),
  };
}

/** Methods of protocol version 1's first kernel suites, gone since `kernel` took every op: named when a runner still offers them. */
const REMOVED_KERNEL_METHODS = ["dequantize", "matvec"] as const;

const REGION_SEMANTICS: readonly TraceCapture["regionSemantics"][] = ["fixed-per-bank", "fixed-total", "dynamic"];

/** A trace_demand result, every field checked and named when wrong (a device runner's profiler is new code too). */
function traceCaptures(result: unknown): TraceCapture[] {
  const captures = (result as { captures?: unknown } | null)?.captures;
  const wrong = (field: string, what: string, value: unknown) => new Error(`runner trace_demand: result.${field} must be ${what} (got ${JSON.stringify(value)?.slice(0, 80) ?? "nothing"})`);
  if (!Array.isArray(captures)) throw wrong("captures", "a list of {capture, demand_bytes, region_bytes, region_semantics}", captures);
  return captures.map((entry: unknown, i) => {
    const c = (entry ?? {}) as Record<string, unknown>;
    if (typeof c.capture !== "string") throw wrong(`captures[${i}].capture`, "a string naming the captured graph", c.capture);
    for (const field of ["demand_bytes", "region_bytes"]) {
      if (!Number.isInteger(c[field]) || (c[field] as number) < 0) throw wrong(`captures[${i}].${field}`, "a whole number of bytes", c[field]);
    }
    if (!REGION_SEMANTICS.includes(c.region_semantics as TraceCapture["regionSemantics"])) throw wrong(`captures[${i}].region_semantics`, `one of ${REGION_SEMANTICS.join(", ")}`, c.region_semantics);
    return { capture: c.capture, demandBytes: c.demand_bytes as number, regionBytes: c.region_bytes as number, regionSemantics: c.region_semantics as TraceCapture["regionSemantics"] };
  });
}
