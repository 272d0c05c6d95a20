import { BenchError } from "../errors.js";
import { kernelPairsFromHello } from "./kernel-wire.js";

/**
 * The pure half of the runner protocol (docs/runner-protocol.md): what one line a runner writes on
 * stdout means. No process, no I/O, so every branch can be fuzzed; stdio.ts drives the process.
 */
export const RUNNER_PROTOCOL = "bringup-bench-runner";
export const RUNNER_PROTOCOL_VERSION = 1;

/** The method a runner lists to say it answers kernel requests (its hello then lists the pairs). */
export const KERNEL_METHOD = "kernel";

/**
 * Not a method: a runner that lists it takes `add_special` and `parse_special` in `tokenize` and
 * `render_special` in `detokenize` (without it, tokenize adds BOS and reads special-token text as
 * plain text, and detokenize drops special tokens: protocol version 1 as first written).
 */
export const TOKENIZE_SPECIAL_CAPABILITY = "tokenize_special";

/** Wire method names, snake_case, for each capability the harness knows. */
export const RUNNER_METHODS = {
  tokenize: "tokenize",
  detokenize: "detokenize",
  inspectTokens: "inspect_tokens",
  greedy: "greedy",
  batchedGreedy: "batched_greedy",
  teacherForcedTopK: "teacher_forced_top_k",
  traceDemand: "trace_demand",
  allocations: "allocations",
  kernel: KERNEL_METHOD,
  kernelTime: "kernel_time",
} as const;

export interface Hello {
  readonly protocol: string;
  readonly version: number;
  /** Set instead of capabilities by a runner that cannot start (no device, a plugin it cannot load). */
  readonly error?: string;
  readonly engine?: string;
  readonly capabilities: readonly string[];
  readonly settings?: Readonly<Record<string, string | number | boolean>>;
  /** With the `kernel` capability: the (op, encoding) pairs the runner registers. */
  readonly kernel_ops?: unknown;
  /** The sha256 of the model file the runner loaded, and its name: what the identity check compares with the goldens'. */
  readonly model_sha256?: unknown;
  readonly model_file?: unknown;
  /** How its decode can run (absent: eager only); with `traced`, greedy takes `"mode": "traced"`. */
  readonly modes?: unknown;
}

/** Decode modes a runner may declare: eager, and a traced (captured, replayed) decode graph. */
export const DECODE_MODES = ["eager", "traced"] as const;

/**
 * One protocol line as a JSON object. Python's json module writes NaN and ±Infinity as bare words,
 * which JSON cannot hold: they are read as the strings "NaN", "Infinity", "-Infinity", so the
 * answer is rejected as that prompt's non-finite value instead of the runner being dropped for bad JSON.
 */
export function parseRunnerLine(line: string): Record<string, unknown> {
  let message: unknown;
  try {
    message = JSON.parse(line);
  } catch {
    try {
      message = JSON.parse(line.replace(/([[,:]\s*)(NaN|-?Infinity)(?=\s*[,\]}])/g, '$1"$2"'));
    } catch {
      message = undefined;
    }
  }
  if (typeof message !== "object" || message === null || Array.isArray(message)) {
    throw new BenchError(`the runner wrote a line that is not a JSON object on stdout: ${JSON.stringify(line.slice(0, 80))}`, { field: "stdout", fix: "stdout carries protocol lines only; print logs to stderr" });
  }
  return message as Record<string, unknown>;
}

/** The runner's first line, checked field by field. */
export function checkHello(message: Record<string, unknown>): Hello {
  const hello = message as unknown as Hello;
  if (hello.protocol !== RUNNER_PROTOCOL) {
    throw new BenchError(`the runner's first line is not a ${RUNNER_PROTOCOL} hello: ${JSON.stringify(message).slice(0, 120)}`, { field: "hello.protocol", fix: `write {"protocol": "${RUNNER_PROTOCOL}", "version": ${RUNNER_PROTOCOL_VERSION}, "capabilities": [...]} first` });
  }
  if (typeof hello.error === "string") {
    throw new BenchError(`the runner cannot start: ${hello.error}`, { field: "hello.error", fix: "fix what the runner says, then rerun" });
  }
  if (hello.version !== RUNNER_PROTOCOL_VERSION) {
    throw new BenchError(`the runner speaks protocol version ${JSON.stringify(hello.version) ?? "(none)"}; this harness speaks ${RUNNER_PROTOCOL_VERSION}`, { field: "hello.version", fix: "update the runner (or the harness) so the versions match" });
  }
  if (!Array.isArray(hello.capabilities) || !hello.capabilities.every((c) => typeof c === "string")) {
    throw new BenchError("the runner's hello has no capabilities list", { field: "hello.capabilities", fix: `list the methods it answers, e.g. ["tokenize", "greedy"]` });
  }
  if (hello.engine !== undefined && typeof hello.engine !== "string") {
    throw new BenchError(`the runner's engine must be a string (got ${JSON.stringify(hello.engine).slice(0, 40)})`, { field: "hello.engine", fix: "name the engine in a string, or leave it out" });
  }
  const settings = hello.settings as unknown;
  if (settings !== undefined && (typeof settings !== "object" || settings === null || Array.isArray(settings))) {
    throw new BenchError("the runner's settings must be an object", { field: "hello.settings", fix: `e.g. {"precision": "bf16", "cores": 64}` });
  }
  if (hello.capabilities.includes(KERNEL_METHOD)) {
    try {
      kernelPairsFromHello(hello.kernel_ops);
    } catch (error) {
      throw new BenchError((error as Error).message, { field: "hello.kernel_ops", fix: `list what the kernel method answers, e.g. [{"op": "rms_norm", "encoding": "F32:F32"}]` });
    }
  }
  if (hello.model_sha256 !== undefined && (typeof hello.model_sha256 !== "string" || !/^[0-9a-f]{64}$/.test(hello.model_sha256))) {
    throw new BenchError(`the runner's hello has model_sha256 ${JSON.stringify(hello.model_sha256).slice(0, 80)}, not 64 lowercase hex digits`, { field: "hello.model_sha256", fix: "send the sha256 hex digest of the model file the runner loaded, or leave the field out" });
  }
  if (hello.modes !== undefined && (!Array.isArray(hello.modes) || !hello.modes.every((mode) => (DECODE_MODES as readonly unknown[]).includes(mode)))) {
    throw new BenchError(`the runner's hello declares modes ${JSON.stringify(hello.modes).slice(0, 80)}`, { field: "hello.modes", fix: `list some of ${DECODE_MODES.map((m) => JSON.stringify(m)).join(", ")}, or leave modes out (eager only)` });
  }
  return hello;
}

/** What an answer line says: a result, an error (unsupported or not), or neither (a runner bug). */
export type RunnerAnswer =
  | { readonly id: unknown; readonly kind: "result"; readonly result: unknown }
  | { readonly id: unknown; readonly kind: "error"; readonly message: string; readonly unsupported: boolean }
  | { readonly id: unknown; readonly kind: "neither" };

/** Reads an answer line; never throws, whatever the runner wrote (the id is matched by the caller). */
export function readAnswer(message: Record<string, unknown>): RunnerAnswer {
  const { id, error } = message;
  if (error !== undefined) {
    const fields = typeof error === "object" && error !== null ? error as { message?: unknown; unsupported?: unknown } : {};
    const text = typeof fields.message === "string" ? fields.message : JSON.stringify(fields.message ?? error) ?? String(error);
    return { id, kind: "error", message: text, unsupported: fields.unsupported === true };
  }
  if (!("result" in message)) return { id, kind: "neither" };
  return { id, kind: "result", result: message.result };
}
