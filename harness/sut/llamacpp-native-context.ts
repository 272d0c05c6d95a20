import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import type { LlamaContext, LlamaContextSequence } from "node-llama-cpp";
import { PACKAGE_ROOT } from "../paths.js";
import type { TopK } from "./types.js";

/** native/llama-context's addon (context_access.cc says why it exists). */
interface ContextAccessAddon {
  open(nativeContext: object, expected: ContextShape): number;
  attachPool(handle: number, poll: number): void;
  yieldCpu(): void;
  settleOutputs(handle: number): void;
  greedyToken(handle: number, batchLogitIndex: number): number;
  logitsRow(handle: number, batchLogitIndex: number, into?: Float32Array): Float32Array;
  stepRow(handle: number, entry: number, into?: Float32Array): Float32Array;
  decodeGreedy(handle: number, sequences: Int32Array, counts: Int32Array, tokens: Int32Array, starts: Int32Array, maxPerDecode: number): Int32Array;
  decodeGreedy(handle: number, sequences: Int32Array, counts: Int32Array, tokens: Int32Array, starts: Int32Array, maxPerDecode: number, topK: Int32Array, draws?: Float64Array): GreedyTopKStep;
  decodeGreedyOffThread(handle: number, sequences: Int32Array, counts: Int32Array, tokens: Int32Array, starts: Int32Array, maxPerDecode: number): Promise<Int32Array>;
  decodeGreedyOffThread(handle: number, sequences: Int32Array, counts: Int32Array, tokens: Int32Array, starts: Int32Array, maxPerDecode: number, topK: Int32Array, draws?: Float64Array): Promise<GreedyTopKStep>;
  /** Present (true) where decodeGreedy takes topK. */
  readonly greedyTopK?: boolean;
  /** Present (true) where a topK of -2 with draws draws a sampled token in the step. */
  readonly drawsInStep?: boolean;
  decodeVerify(handle: number, sequences: Int32Array, counts: Int32Array, tokens: Int32Array, starts: Int32Array): VerifiedBatch;
  teacherForcedTopK(handle: number, sequence: number, tokens: Int32Array, firstScored: number, k: number): NativeTopKRows;
  clearSequence(handle: number, sequence: number): void;
  removeFrom(handle: number, sequence: number, position: number): boolean;
  firstPosition(handle: number, sequence: number): number;
  copySequence(handle: number, source: number, destination: number, p0: number, p1: number): void;
  memoryKind(handle: number): MemoryKind;
  saveCheckpoint(handle: number, sequence: number): Uint8Array;
  restoreCheckpoint(handle: number, sequence: number, data: Uint8Array): boolean;
  saveSequence(handle: number, sequence: number): Uint8Array;
  restoreSequence(handle: number, sequence: number, data: Uint8Array): boolean;
  close(handle: number): void;
  /** Absent in a build from before it was added (server/sampling.ts then draws in JavaScript). */
  sampleRow?: NativeSampleRow;
  /** Absent in a build from before it was added (token-pieces.ts then falls back). */
  tokenPieces?(nativeModel: object, ids: Int32Array, special: boolean): { readonly bytes: Uint8Array; readonly ends: Int32Array };
}

/** A sampled token's draw from its row, `uniform` the request's next number in [0, 1) (row_sampler.cc; server/sampling.ts sampleToken says what it draws). */
export type NativeSampleRow = (row: Float32Array | Float64Array, temperature: number, topK: number, topP: number, minP: number, uniform: number) => number;

/**
 * A greedy step that also reports, for the sequences that asked (topK[i] > 0), the top-k of their
 * next-token log-softmax (double precision, full vocabulary, lower id first on ties, as the argmax)
 * flat in sequence order, and each asking sequence's argmax log-prob (`chosen`, NaN for the others).
 */
export interface GreedyTopKStep {
  readonly next: Int32Array;
  readonly ids: Int32Array;
  readonly logprobs: Float64Array;
  readonly chosen: Float64Array;
}

/** Every position's output of a verification batch, flat in the order of its tokens (decodeVerify). */
export interface VerifiedBatch {
  readonly argmax: Int32Array;
  /** Nats by which the next token of the same sequence in the batch trails the argmax's log-prob (NaN after a sequence's last token). */
  readonly trailNats: Float32Array;
}

/** What the context was created with: checked against node-llama-cpp's and llama.cpp's own view before it is touched. */
export interface ContextShape {
  /** Tokens per sequence. */
  readonly contextSize: number;
  readonly sequences: number;
  readonly batchSize: number;
  readonly threads: number;
}

/** Top-k rows back to back: row r is entries [r*k, (r+1)*k), ids by falling log-probability. */
export interface NativeTopKRows {
  readonly ids: Int32Array;
  readonly logprobs: Float64Array;
  /** Per row, the log-prob of the token that follows it in the input, in the top-k or not (NaN after the last). */
  readonly next: Float64Array;
}

/**
 * Teacher forcing through the addon in a sequence emptied first and emptied again after, so
 * node-llama-cpp (which does not know what the addon decoded) finds it as it left it: each scored
 * position's top-k, and the log-prob of the input's next token there (NaN after the last).
 */
export function teacherForceInEmptySequence(native: Extract<NativeContext, { reached: true }>, sequenceId: number, input: readonly number[], firstScored: number, k: number): { readonly rows: TopK[]; readonly next: Float64Array } {
  native.clearSequence(sequenceId);
  try {
    const flat = native.teacherForcedTopK(sequenceId, Int32Array.from(input), firstScored, k);
    const rows = Array.from({ length: flat.next.length }, (_, row) => ({
      ids: Array.from(flat.ids.subarray(row * k, (row + 1) * k)),
      logprobs: Array.from(flat.logprobs.subarray(row * k, (row + 1) * k)),
    }));
    return { rows, next: flat.next };
  } finally {
    native.clearSequence(sequenceId);
  }
}

/** A greedy step's asked distributions by sequence index: its argmax's log-prob and its top-k (undefined where topK[i] asked none: 0, or -1 for a kept row). */
export function greedyStepDistributions(step: GreedyTopKStep, topK: Int32Array): (index: number) => { readonly logprob: number; readonly top: TopK } | undefined {
  const offsets = new Int32Array(topK.length + 1);
  topK.forEach((k, i) => { offsets[i + 1] = offsets[i] + Math.max(k, 0); });
  return (index) => (topK[index] <= 0 ? undefined : {
    logprob: step.chosen[index],
    top: { ids: Array.from(step.ids.subarray(offsets[index], offsets[index + 1])), logprobs: Array.from(step.logprobs.subarray(offsets[index], offsets[index + 1])) },
  });
}

/**
 * llama.cpp's id of a node-llama-cpp sequence, for the addon's calls (`_sequenceId` is private in
 * its typings; the version is pinned exactly). Whoever uses the id must keep the sequence object
 * referenced as long: node-llama-cpp clears a sequence whose object is garbage-collected (a
 * FinalizationRegistry, llama_memory_seq_rm on the whole sequence) and hands its id out again, at
 * whatever moment the collector runs.
 */
export function sequenceIdOf(sequence: LlamaContextSequence): number {
  return (sequence as unknown as { _sequenceId: number })._sequenceId;
}

/** What kind of per-sequence state the model keeps: what a prompt cache may truncate and what it must checkpoint. */
export interface MemoryKind {
  /** Only recurrent state (Mamba-style): nothing can be truncated. */
  readonly recurrent: boolean;
  /** Attention KV plus recurrent state (GatedDeltaNet, Mamba2 hybrids): the recurrent part cannot be truncated. */
  readonly hybrid: boolean;
  /** Sliding-window size in tokens (0: none): cells that left the window are gone. */
  readonly slidingWindow: number;
}

const ADDON_DIR = join(PACKAGE_ROOT, "native", "llama-context", "build");

/**
 * How long a pool's idle workers poll before they sleep, in ggml's units (×131,072 spin rounds,
 * ~5 ms each on our dev box). One covers the gap between two tokens, and between a response and a client's
 * next request, with room to spare; llama-server's default of 50 (~0.2 s of spinning after every
 * graph) measured no faster per token and takes a core from everything else on a small machine.
 */
const POLL = 1;
/** Rows logitsRow keeps for reuse: a step's samplings each take one and give it back before the next step. */
const RECYCLED_ROWS = 64;

/**
 * The llama.cpp context inside a node-llama-cpp context, reached through our addon, or why it
 * could not be: then the context works as node-llama-cpp ships it (threads created per graph).
 */
export type NativeContext =
  | {
    readonly reached: true;
    /** Whether graphs run on a persistent thread pool (more than one thread) or on the calling thread. */
    readonly threads: "persistent pool" | "calling thread";
    /** Lets another thread that is ready to run on this core run first (sched_yield). */
    readonly yieldCpu: () => void;
    /** Does llama.cpp's in-place reorder of the last batch's outputs now, on this thread. */
    readonly settleOutputs: () => void;
    /** The argmax of a batch output's logits (the first of equal maxima, as llama.cpp's greedy sampler), on this thread. */
    readonly greedyToken: (batchLogitIndex: number) => number;
    /** A copy of a batch output's logits, one per vocabulary entry (what the server samples from), on this thread; into a row given back with recycleRow where there is one. */
    readonly logitsRow: (batchLogitIndex: number) => Float32Array;
    /** The logits row the last decodeGreedyTopK kept for its entry `entry` (topK -1): a sampled request's token, drawn from it in JavaScript; recycled as logitsRow's are. */
    readonly stepRow: (entry: number) => Float32Array;
    /** Gives back a row from logitsRow or stepRow that nothing reads any more, for the next one to fill. */
    readonly recycleRow: (row: Float32Array) => void;
    /**
     * Sequence i's next counts[i] tokens (back to back in `tokens`) at positions starts[i] onwards,
     * in one llama_decode (more past the batch size), and the argmax of each sequence's last output,
     * outside node-llama-cpp (which then does not know those tokens: the caller tracks positions
     * and clears with clearSequence). Never while node-llama-cpp evaluates. At most maxPerDecode
     * tokens go into one llama_decode (a prefill chunk; the batch size caps it). On this thread.
     */
    readonly decodeGreedy: (sequences: Int32Array, counts: Int32Array, tokens: Int32Array, starts: Int32Array, maxPerDecode: number) => Int32Array;
    /** decodeGreedy's step on a worker thread, the event loop going on meanwhile (a hop each way: worth it for a step that carries prompt tokens); until it settles, every other call here throws. */
    readonly decodeGreedyOffThread: (sequences: Int32Array, counts: Int32Array, tokens: Int32Array, starts: Int32Array, maxPerDecode: number) => Promise<Int32Array>;
    /**
     * decodeGreedy, and each sequence's top-topK[i] next-token log-probs where topK[i] > 0 (a greedy
     * request that asked for log-probs), its whole logits row kept for stepRow where topK[i] is -1,
     * or where it is -2 its sampled token drawn from the row in the step (`next`), with draws[5i..5i+4]
     * = temperature, top_k, top_p, min_p and the request's uniform number (server/sampling.ts's
     * draw, row_sampler.cc), on this thread or a worker's.
     */
    readonly decodeGreedyTopK: (sequences: Int32Array, counts: Int32Array, tokens: Int32Array, starts: Int32Array, maxPerDecode: number, topK: Int32Array, offThread: boolean, draws?: Float64Array) => GreedyTopKStep | Promise<GreedyTopKStep>;
    /** Whether decodeGreedyTopK draws sampled tokens in the step (this checkout's addon does; an older build keeps rows for stepRow only). */
    readonly drawsInStep: boolean;
    /**
     * As decodeGreedy, but with an output at every token (a speculative verification: the target
     * checks a sequence's drafted tokens in one evaluation): each one's argmax, and by how much the
     * batch's next token of that sequence trails it. One call may span several llama_decodes.
     */
    readonly decodeVerify: (sequences: Int32Array, counts: Int32Array, tokens: Int32Array, starts: Int32Array) => VerifiedBatch;
    /**
     * Decodes `tokens` into an empty sequence at positions 0 onwards and returns, for every position
     * from firstScored on, the top-k of the next-token log-softmax (double precision, full vocabulary,
     * lower id first on ties), on this thread, outside node-llama-cpp (the caller clears the sequence
     * before and after). What teacher forcing needs, without node-llama-cpp's Map of the whole
     * vocabulary per position. Never while node-llama-cpp evaluates.
     */
    readonly teacherForcedTopK: (sequence: number, tokens: Int32Array, firstScored: number, k: number) => NativeTopKRows;
    /** Removes every cell and any recurrent state of a sequence. */
    readonly clearSequence: (sequence: number) => void;
    /** Drops a sequence's cells at and after a position; false where its memory cannot (recurrent state). */
    readonly removeFrom: (sequence: number, position: number) => boolean;
    /** The smallest position a sequence still holds (on SWA models, the window's start), -1 when empty. */
    readonly firstPosition: (sequence: number) => number;
    /** The destination also holds the source's cells in [p0, p1). */
    readonly copySequence: (source: number, destination: number, p0: number, p1: number) => void;
    readonly memoryKind: MemoryKind;
    /** The sequence's state that cannot be truncated (recurrent, sliding window): llama.cpp's partial state. */
    readonly saveCheckpoint: (sequence: number) => Uint8Array;
    /** Puts a saved checkpoint back into a sequence; false where llama.cpp refused it. */
    readonly restoreCheckpoint: (sequence: number, data: Uint8Array) => boolean;
    /** Everything a sequence holds, attention cells included (llama.cpp's whole sequence state): what a host-memory prompt cache keeps. */
    readonly saveSequence: (sequence: number) => Uint8Array;
    /** A saveSequence's state replaces what the sequence holds; false where llama.cpp refused it. */
    readonly restoreSequence: (sequence: number, data: Uint8Array) => boolean;
    /** Frees the pool: call after the context is disposed. */
    readonly close: () => void;
  }
  | { readonly reached: false; readonly reason: string };

let addon: ContextAccessAddon | string | undefined;

function loadAddon(): ContextAccessAddon | string {
  const path = join(ADDON_DIR, "Release", "llama_context_access.node");
  if (!existsSync(path)) {
    const failed = join(ADDON_DIR, "BUILD_FAILED");
    return existsSync(failed) ? `the llama-context addon did not build: ${readFileSync(failed, "utf8").trim().split("\n").pop()}` : "the llama-context addon is not built";
  }
  try {
    const loaded = createRequire(import.meta.url)(path) as ContextAccessAddon;
    // A build from before a function was added: this checkout's code would call what is not there.
    if (typeof loaded.teacherForcedTopK !== "function" || loaded.greedyTopK !== true || typeof loaded.logitsRow !== "function" || typeof loaded.saveSequence !== "function" || typeof loaded.stepRow !== "function") return "the llama-context addon is older than this checkout (no top-k in its greedy step, no logitsRow, saveSequence or stepRow): rebuild it with npm run build:native";
    return loaded;
  } catch (error) {
    return `the llama-context addon did not load: ${(error as Error).message}`;
  }
}

/** The addon, or why it is not there (loaded once per process). */
export function contextAccessAddon(): ContextAccessAddon | string {
  addon ??= loadAddon();
  return addon;
}

let warned = false;

/**
 * Reaches the context and, with more than one thread, gives it a persistent ggml thread pool (as
 * llama-server does). Where that fails the context still works, only slower on machines whose idle
 * cores sleep deeply: said once on stderr, never silently.
 */
export function reachNativeContext(context: LlamaContext, shape: ContextShape): NativeContext {
  addon ??= loadAddon();
  let outcome: NativeContext;
  if (typeof addon === "string") {
    outcome = { reached: false, reason: addon };
  } else {
    const loaded = addon;
    try {
      // `_ctx` is node-llama-cpp's native context (private in its typings; the version is pinned exactly).
      // node-llama-cpp gives llama.cpp one more batch slot on sliding-window models without a full-size window cache (its LlamaContext constructor).
      // Read defensively: what is passed may not be a node-llama-cpp context at all (open says so then).
      const internal = context as unknown as { _ctx: object; _swaFullCache?: boolean; model?: { fileInsights?: { swaSize?: number } } };
      const swaExtra = (internal.model?.fileInsights?.swaSize ?? 0) > 0 && internal._swaFullCache !== true ? 1 : 0;
      const handle = loaded.open(internal._ctx, { ...shape, batchSize: shape.batchSize + swaExtra });
      const recycled: Float32Array[] = [];
      if (shape.threads > 1) loaded.attachPool(handle, POLL);
      outcome = {
        reached: true,
        threads: shape.threads > 1 ? "persistent pool" : "calling thread",
        yieldCpu: () => loaded.yieldCpu(),
        settleOutputs: () => loaded.settleOutputs(handle),
        greedyToken: (batchLogitIndex) => loaded.greedyToken(handle, batchLogitIndex),
        logitsRow: (batchLogitIndex) => loaded.logitsRow(handle, batchLogitIndex, recycled.pop()),
        stepRow: (entry) => loaded.stepRow(handle, entry, recycled.pop()),
        recycleRow: (row) => {
          if (recycled.length < RECYCLED_ROWS) recycled.push(row);
        },
        decodeGreedy: (sequences, counts, tokens, starts, maxPerDecode) => loaded.decodeGreedy(handle, sequences, counts, tokens, starts, maxPerDecode),
        decodeGreedyOffThread: (sequences, counts, tokens, starts, maxPerDecode) => loaded.decodeGreedyOffThread(handle, sequences, counts, tokens, starts, maxPerDecode),
        decodeGreedyTopK: (sequences, counts, tokens, starts, maxPerDecode, topK, offThread, draws) => (offThread
          ? loaded.decodeGreedyOffThread(handle, sequences, counts, tokens, starts, maxPerDecode, topK, draws)
          : loaded.decodeGreedy(handle, sequences, counts, tokens, starts, maxPerDecode, topK, draws)),
        drawsInStep: loaded.drawsInStep === true,
        decodeVerify: (sequences, counts, tokens, starts) => loaded.decodeVerify(handle, sequences, counts, tokens, starts),
        teacherForcedTopK: (sequence, tokens, firstScored, k) => loaded.teacherForcedTopK(handle, sequence, tokens, firstScored, k),
        clearSequence: (sequence) => loaded.clearSequence(handle, sequence),
        removeFrom: (sequence, position) => loaded.removeFrom(handle, sequence, position),
        firstPosition: (sequence) => loaded.firstPosition(handle, sequence),
        copySequence: (source, destination, p0, p1) => loaded.copySequence(handle, source, destination, p0, p1),
        memoryKind: loaded.memoryKind(handle),
        saveCheckpoint: (sequence) => loaded.saveCheckpoint(handle, sequence),
        restoreCheckpoint: (sequence, data) => loaded.restoreCheckpoint(handle, sequence, data),
        saveSequence: (sequence) => loaded.saveSequence(handle, sequence),
        restoreSequence: (sequence, data) => loaded.restoreSequence(handle, sequence, data),
        close: () => loaded.close(handle),
      };
    } catch (error) {
      outcome = { reached: false, reason: (error as Error).message };
    }
  }
  if (!outcome.reached && shape.threads > 1 && !warned) {
    warned = true;
    process.stderr.write(`warning: llama.cpp creates its ${shape.threads} threads anew for every graph (${outcome.reason}); on machines whose idle cores sleep deeply each token can take ~25× longer\n  hint: npm run build:native (needs git, g++ and make)\n`);
  }
  return outcome;
}

/** Frees what reachNativeContext made; after the context is disposed. */
export function releaseNativeContext(native: NativeContext): void {
  if (native.reached) native.close();
}
