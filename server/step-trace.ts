import { closeSync, openSync, renameSync, rmSync, write, writeSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { constants, performance, PerformanceObserver, type PerformanceEntry } from "node:perf_hooks";
import { BenchError } from "../harness/errors.js";

/**
 * `bench serve --trace-steps FILE`: one JSON line per engine step and per request event, so that a
 * first token's wait can be taken apart afterwards (scripts/ttft-anatomy.ts; the format is
 * documented in docs/step-trace.md). Times are epoch milliseconds (performance.timeOrigin +
 * performance.now()), so a client in another process can line them up with its own clock.
 */
const STEP_TRACE_FORMAT = "bench-step-trace";
const STEP_TRACE_VERSION = 1;

/** The parts of one engine step, in the order engine.ts's step loop takes them; each ends where the next begins. */
export const STEP_PHASES = ["admit", "node", "speculate", "prepare", "decode", "settle", "turn", "yield"] as const;
export type StepPhase = (typeof STEP_PHASES)[number];

export interface StepTraceHeader {
  readonly format: typeof STEP_TRACE_FORMAT;
  readonly version: number;
  /** Epoch ms when the trace began. */
  readonly t: number;
  readonly pid: number;
  /** The server's numerics (as /v1/models reports them). */
  readonly settings: Readonly<Record<string, unknown>>;
}

export interface StepLine {
  readonly ev: "step";
  readonly step: number;
  /** Start, epoch ms. */
  readonly t: number;
  readonly ms: number;
  /** Requests this step took from the queue into a slot. */
  readonly admitted: number;
  /** Slots that generated a token this step (neither admitted in it nor still prefilling). */
  readonly decoding: number;
  /** Prompt and generated tokens in the step's own llama_decode (stepBatch; node-llama-cpp's batches are not counted). */
  readonly prompt_tokens: number;
  readonly decode_tokens: number;
  /** Whether that llama_decode ran on a worker thread. */
  readonly off_thread: boolean;
  /** Milliseconds of each part; they add up to `ms`. */
  readonly phases_ms: Readonly<Record<StepPhase, number>>;
}

/** The handler of a generation route began (before its body was read). */
export interface HttpLine {
  readonly ev: "http";
  readonly req: number;
  readonly t: number;
  readonly path: string;
}

/** A prompt queued in the engine: `req` is the HTTP request it came with (absent for one submitted otherwise). */
export interface SubmitLine {
  readonly ev: "submit";
  readonly job: number;
  readonly req?: number;
  readonly t: number;
  readonly prompt_tokens: number;
  /** promptKey of its prompt ids: how a client that knows the ids it sent finds its request. */
  readonly key: string;
}

export interface AdmitLine {
  readonly ev: "admit";
  readonly job: number;
  readonly step: number;
  readonly t: number;
}

/** The first generated token: settled (`t`) and handed to the response's socket (`written`). */
export interface FirstTokenLine {
  readonly ev: "first";
  readonly job: number;
  readonly step: number;
  readonly t: number;
  readonly written: number;
}

/**
 * A garbage collector pause of the server's JavaScript thread, as Node reports it: shortly after the
 * pause, so these lines come later in the file than the lines of their time.
 */
export interface GcLine {
  readonly ev: "gc";
  readonly t: number;
  readonly ms: number;
  readonly kind: "minor" | "major" | "incremental" | "weakcb" | "other";
}

export type StepTraceLine = StepLine | HttpLine | SubmitLine | AdmitLine | FirstTokenLine | GcLine;

function gcKind(entry: PerformanceEntry): GcLine["kind"] {
  // Node puts the kind in `detail` (its typings here do not declare it).
  switch ((entry as { detail?: { kind?: number } }).detail?.kind) {
    case constants.NODE_PERFORMANCE_GC_MINOR: return "minor";
    case constants.NODE_PERFORMANCE_GC_MAJOR: return "major";
    case constants.NODE_PERFORMANCE_GC_INCREMENTAL: return "incremental";
    case constants.NODE_PERFORMANCE_GC_WEAKCB: return "weakcb";
    default: return "other";
  }
}

/** FNV-1a (32 bits) over the ids: a short name for a prompt, the same in the server and in a client. */
export function promptKey(ids: readonly number[]): string {
  let hash = 0x811c9dc5;
  for (const id of ids) {
    for (let shift = 0; shift < 32; shift += 8) {
      hash ^= (id >>> shift) & 0xff;
      hash = Math.imul(hash, 0x01000193);
    }
  }
  return (hash >>> 0).toString(16).padStart(8, "0");
}

/** Buffered bytes that start a write of their own (the write runs on libuv's pool, off the engine's thread). */
const FLUSH_BYTES = 64 * 1024;

const epochMs = (now: number): number => Math.round((performance.timeOrigin + now) * 1000) / 1000;
const ms = (duration: number): number => Math.round(duration * 1000) / 1000;

/**
 * Writes the trace: lines are buffered and written at their own file offsets, so a write in
 * flight and the last synchronous one at exit never overlap. The file is written beside FILE and
 * renamed onto it when the server shuts down (or the process exits), so a reader never sees half
 * of one. A write error is one warning, after which tracing stops; the server goes on.
 */
export class StepTracer {
  private readonly temporary: string;
  private fd: number | undefined;
  private pending: string[] = [];
  private pendingBytes = 0;
  private position = 0;
  /** Writes not known to be done, by file offset: the exit listener writes them again, synchronously. */
  private readonly inFlight = new Map<number, Buffer>();
  private drained: (() => void) | undefined;
  private requests = 0;
  private jobs = 0;
  // The step being taken (one at a time: the engine's loop is sequential).
  private step = 0;
  private stepStart = 0;
  private readonly marks = new Float64Array(STEP_PHASES.length);
  private admitted = 0;
  private decoding = 0;
  private promptTokens = 0;
  private decodeTokens = 0;
  private offThread = false;
  private readonly exitFlush = () => this.finishSync();
  private readonly gc = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) this.append({ ev: "gc", t: epochMs(entry.startTime), ms: ms(entry.duration), kind: gcKind(entry) } satisfies GcLine);
  });

  constructor(readonly path: string, settings: Readonly<Record<string, unknown>>, private readonly onWarning: (message: string) => void) {
    this.temporary = join(dirname(path), `.${basename(path)}.tmp-${process.pid}`);
    try {
      this.fd = openSync(this.temporary, "w");
    } catch (error) {
      throw new BenchError(`cannot write the step trace (${(error as NodeJS.ErrnoException).code ?? String(error)})`, { file: path, field: "--trace-steps", fix: "give a file in a directory that exists and is writable" });
    }
    const header: StepTraceHeader = { format: STEP_TRACE_FORMAT, version: STEP_TRACE_VERSION, t: epochMs(performance.now()), pid: process.pid, settings };
    this.append(header);
    process.once("exit", this.exitFlush);
    this.gc.observe({ entryTypes: ["gc"] });
  }

  /** A generation route's handler began; its id goes with the prompts it submits. */
  httpStarted(path: string): number {
    this.append({ ev: "http", req: ++this.requests, t: epochMs(performance.now()), path } satisfies HttpLine);
    return this.requests;
  }

  submitted(promptIds: readonly number[], req: number | undefined): number {
    this.append({ ev: "submit", job: ++this.jobs, ...(req === undefined ? {} : { req }), t: epochMs(performance.now()), prompt_tokens: promptIds.length, key: promptKey(promptIds) } satisfies SubmitLine);
    return this.jobs;
  }

  stepStarted(now: number): void {
    this.step++;
    this.stepStart = now;
    this.marks.fill(NaN);
    this.admitted = 0;
    this.decoding = 0;
    this.promptTokens = 0;
    this.decodeTokens = 0;
    this.offThread = false;
  }

  admittedJob(job: number): void {
    this.append({ ev: "admit", job, step: this.step, t: epochMs(performance.now()) } satisfies AdmitLine);
  }

  /** What the step holds once its admissions are done. */
  composition(admitted: number, decoding: number): void {
    this.admitted = admitted;
    this.decoding = decoding;
  }

  phaseEnded(phase: StepPhase): void {
    this.marks[STEP_PHASES.indexOf(phase)] = performance.now();
  }

  /** The step's own llama_decode is about to run over these stretches (ends the `prepare` phase). */
  decodeStarted(stretches: readonly { readonly piece: readonly unknown[]; readonly prefilling: boolean }[], offThread: boolean): void {
    this.phaseEnded("prepare");
    for (const { piece, prefilling } of stretches) {
      if (prefilling) this.promptTokens += piece.length;
      else this.decodeTokens += piece.length;
    }
    this.offThread = offThread;
  }

  firstToken(job: number, settledAt: number): void {
    this.append({ ev: "first", job, step: this.step, t: epochMs(settledAt), written: epochMs(performance.now()) } satisfies FirstTokenLine);
  }

  /** Ends the `yield` phase and the step; a part the step did not take (no greedy slot, say) lasts 0 ms. */
  stepEnded(): void {
    this.phaseEnded("yield");
    let previous = this.stepStart;
    const phases = {} as Record<StepPhase, number>;
    STEP_PHASES.forEach((phase, i) => {
      const end = Number.isNaN(this.marks[i]) ? previous : this.marks[i];
      phases[phase] = ms(end - previous);
      previous = end;
    });
    this.append({
      ev: "step", step: this.step, t: epochMs(this.stepStart), ms: ms(previous - this.stepStart), admitted: this.admitted, decoding: this.decoding,
      prompt_tokens: this.promptTokens, decode_tokens: this.decodeTokens, off_thread: this.offThread, phases_ms: phases,
    } satisfies StepLine);
  }

  /** Writes what is buffered, waits for writes in flight, and puts the file in place. */
  async close(): Promise<void> {
    if (this.inFlight.size > 0) await new Promise<void>((resolve) => { this.drained = resolve; });
    this.finishSync();
  }

  private append(line: StepTraceHeader | StepTraceLine): void {
    if (this.fd === undefined) return;
    const text = `${JSON.stringify(line)}\n`;
    this.pending.push(text);
    this.pendingBytes += text.length;
    if (this.pendingBytes >= FLUSH_BYTES) this.flush();
  }

  private takePending(): Buffer {
    const bytes = Buffer.from(this.pending.join(""), "utf8");
    this.pending = [];
    this.pendingBytes = 0;
    return bytes;
  }

  private flush(): void {
    const bytes = this.takePending();
    const at = this.position;
    this.position += bytes.length;
    this.inFlight.set(at, bytes);
    write(this.fd!, bytes, 0, bytes.length, at, (error) => {
      this.inFlight.delete(at);
      if (error !== null) this.fail(error);
      if (this.inFlight.size === 0) this.drained?.();
    });
  }

  /** The rest, synchronously (also from the 'exit' listener, which cannot wait), then the rename. */
  private finishSync(): void {
    process.removeListener("exit", this.exitFlush);
    this.gc.disconnect();
    if (this.fd === undefined) return;
    const fd = this.fd;
    this.fd = undefined;
    try {
      for (const [at, bytes] of this.inFlight) writeSync(fd, bytes, 0, bytes.length, at);
      const bytes = this.takePending();
      writeSync(fd, bytes, 0, bytes.length, this.position);
    } catch (error) {
      this.fd = fd;
      this.fail(error as Error);
      return;
    }
    // Closed once, here: a rename that fails must not close the number again (it may be another file's by then).
    try {
      closeSync(fd);
      renameSync(this.temporary, this.path);
    } catch (error) {
      this.abandon(error as Error);
    }
  }

  private fail(error: Error): void {
    this.gc.disconnect();
    if (this.fd === undefined) return;
    const fd = this.fd;
    this.fd = undefined;
    try { closeSync(fd); } catch { /* already failing: the warning below is the one report */ }
    this.abandon(error);
  }

  /** Drops what is left of a trace whose file is already closed, with the one warning. */
  private abandon(error: Error): void {
    this.pending = [];
    rmSync(this.temporary, { force: true });
    this.onWarning(`step trace ${this.path}: ${(error as NodeJS.ErrnoException).code ?? error.message}; tracing stopped, the server goes on`);
  }
}

export interface StepTrace {
  readonly header: StepTraceHeader;
  readonly steps: readonly StepLine[];
  readonly http: readonly HttpLine[];
  readonly submits: readonly SubmitLine[];
  readonly admits: readonly AdmitLine[];
  readonly firsts: readonly FirstTokenLine[];
  /** In time order (the file has them as Node reported them). */
  readonly gcs: readonly GcLine[];
}

/** The numeric fields each event must carry (a line missing one is an error, never a silent gap). */
const NUMERIC_FIELDS: Readonly<Record<StepTraceLine["ev"], readonly string[]>> = {
  step: ["step", "t", "ms", "admitted", "decoding", "prompt_tokens", "decode_tokens"],
  http: ["req", "t"],
  submit: ["job", "t", "prompt_tokens"],
  admit: ["job", "step", "t"],
  first: ["job", "step", "t", "written"],
  gc: ["t", "ms"],
};

/** Pure: a trace file's text, checked line by line against the format it names in its first line. */
export function parseStepTrace(text: string, file: string): StepTrace {
  const lines = text.split("\n").filter((line) => line !== "");
  const bad = (index: number, why: string, fix: string) => new BenchError(why, { file, field: `line ${index + 1}`, fix });
  const parsed = lines.map((line, i) => {
    try {
      return JSON.parse(line) as Record<string, unknown>;
    } catch {
      throw bad(i, "not JSON", "a step trace is one JSON object per line, as `bench serve --trace-steps` writes it");
    }
  });
  const header = parsed[0] as Partial<StepTraceHeader> | undefined;
  if (header?.format !== STEP_TRACE_FORMAT || header.version !== STEP_TRACE_VERSION) {
    throw bad(0, `not a ${STEP_TRACE_FORMAT} version ${STEP_TRACE_VERSION} header (format ${JSON.stringify(header?.format)}, version ${JSON.stringify(header?.version)})`, "trace again with this checkout's `bench serve --trace-steps`");
  }
  const trace = { header: header as StepTraceHeader, steps: [] as StepLine[], http: [] as HttpLine[], submits: [] as SubmitLine[], admits: [] as AdmitLine[], firsts: [] as FirstTokenLine[], gcs: [] as GcLine[] };
  const lists = { step: trace.steps, http: trace.http, submit: trace.submits, admit: trace.admits, first: trace.firsts, gc: trace.gcs } as const;
  parsed.slice(1).forEach((line, i) => {
    const ev = line.ev as StepTraceLine["ev"];
    const fields = Object.hasOwn(NUMERIC_FIELDS, ev) ? NUMERIC_FIELDS[ev] : undefined;
    if (fields === undefined) throw bad(i + 1, `unknown event ${JSON.stringify(line.ev)}`, `events are ${Object.keys(NUMERIC_FIELDS).join(", ")}`);
    const missing = fields.find((field) => typeof line[field] !== "number");
    if (missing !== undefined) throw bad(i + 1, `${ev} has no number ${missing}`, "a truncated or hand-edited trace: trace again");
    (lists[ev] as unknown[]).push(line);
  });
  trace.gcs.sort((a, b) => a.t - b.t);
  return trace;
}
