import { setTimeout as sleep } from "node:timers/promises";
import { performance } from "node:perf_hooks";
import { randomInt } from "node:crypto";
import type { LlamaContext, LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import { topKFromProbabilities } from "../harness/sut/topk.js";
import type { TokenId, TopK } from "../harness/sut/types.js";
import { readNextRankedRow, type ServerFault } from "./faults.js";
import { sampleToken, SamplingRandom, type SamplingParams } from "./sampling.js";
import { rowFromProbabilities, rowLogSumExp, rowTopK, type LogitsRow } from "./logits-row.js";
import { scanStops } from "./stop-strings.js";
import { PieceRenderer } from "./token-text.js";
import { orderSampling } from "./sampling-order.js";
import { greedyStepDistributions, teacherForceInEmptySequence, type NativeContext } from "../harness/sut/llamacpp-native-context.js";
import type { DraftSpeculator, SpeculationOutcome } from "./speculation.js";
import type { StepTracer } from "./step-trace.js";
import { chooseSlot, misfiledCheckpoint, prefillStops, reusePrefix, SlotCache, stateKind, type PrefillStop, type PromptCacheSettings, type StateKind } from "./prompt-cache.js";

export type FinishReason = "stop" | "length" | "cancelled";

export interface GenerationRequest {
  readonly promptIds: readonly TokenId[];
  readonly maxTokens: number;
  readonly sampling: SamplingParams;
  /** Same seed, same tokens; absent: a random seed. */
  readonly seed?: number;
  readonly stop: readonly string[];
  readonly ignoreEos: boolean;
  /** false: evaluate the whole prompt, reusing nothing the slot holds (llama-server's `cache_prompt: false`); absent: the server's setting. */
  readonly cachePrompt?: boolean;
  /** Whether each generated token carries its own log-prob. */
  readonly tokenLogprobs: boolean;
  /** Top-k log-probs per generated token (0: none). */
  readonly logprobs: number;
  /** Log-probs for every prompt position after the first, with this many top-k (0: none): echo, teacher forcing over HTTP. */
  readonly promptLogprobs: number;
  readonly signal: AbortSignal;
  /** Called for every generated token as it is produced (streaming). */
  readonly onToken?: (token: GeneratedToken) => void;
  /** The HTTP request's id in the step trace (`--trace-steps`), which its submit line names. */
  readonly traceRequest?: number;
}

export interface GeneratedToken {
  readonly id: TokenId;
  /** The text this token adds to the output in context (pieces concatenate to the full output). */
  readonly piece: string;
  /**
   * Text this token releases to a stream: empty until a multi-byte character completes, and text
   * that could begin a stop string is held back until it cannot (see GenerationResult.unstreamedText).
   */
  readonly text: string;
  /** Present when the request asked for log-probs (greedy without them never builds a distribution). */
  readonly logprob?: number;
  readonly top?: TopK;
}

/** A prompt position's log-prob of the token actually there, and its top-k. */
export interface PromptLogprob {
  readonly logprob: number;
  readonly top: TopK;
}

export interface GenerationResult {
  readonly tokens: readonly GeneratedToken[];
  /** The output text, cut before the first stop string. */
  readonly text: string;
  /** The tail of `text` no token released to the stream (held back as a possible stop string when the request ended). */
  readonly unstreamedText: string;
  readonly finishReason: FinishReason;
  /** Positions 1..n-1 of the prompt, when promptLogprobs > 0. */
  readonly promptLogprobs?: readonly PromptLogprob[];
  readonly ttftSeconds: number | undefined;
  /** Prompt tokens not evaluated because the slot's cache held them (usage.prompt_tokens_details.cached_tokens). */
  readonly cachedTokens: number;
  /** Milliseconds from the first generated token to the last (llama-server's timings.predicted_ms). */
  readonly generatingMs: number;
  /** Tokens a draft model proposed for this request, and how many the target kept (0 and 0 without speculation). */
  readonly drafted: number;
  readonly accepted: number;
  /** Output positions whose token is a kept draft (the rest are the target's own). */
  readonly acceptedDraftPositions: readonly number[];
}

/** Thrown by submit when the in-flight cap is reached (the HTTP layer answers 429). */
export class EngineFullError extends Error {}
/** Thrown by submit while draining (503). */
export class EngineDrainingError extends Error {}

export interface EngineObserver {
  readonly submitted: () => void;
  readonly rejected: () => void;
  /** A submitted request the engine failed: with finished, every submitted request is counted once. */
  readonly errored: () => void;
  readonly finished: (reason: FinishReason, ttftSeconds: number | undefined, generated: number) => void;
  /** A prompt admitted to a slot: its length, the tokens reported cached, and the tokens it will evaluate. */
  readonly prompt: (tokens: number, cached: number, evaluated: number) => void;
  readonly step: (seconds: number, activeSlots: number, queueDepth: number) => void;
  /** A speculative step of one request: tokens drafted and kept. */
  readonly speculated: (drafted: number, accepted: number) => void;
}

interface Slot {
  readonly sequence: LlamaContextSequence;
  /** llama.cpp's sequence id (node-llama-cpp's, internal in its typings), for decodes outside it. */
  readonly sequenceId: number;
  /** Whether node-llama-cpp evaluated tokens in it since it was last cleared (its clearHistory is then needed). */
  throughNode: boolean;
  /** What the sequence holds for stepGreedily (its length is where the next token goes); empty for node-llama-cpp's path. */
  readonly cache: SlotCache;
  job: Job | undefined;
}

interface Job {
  readonly request: GenerationRequest;
  readonly random: SamplingRandom;
  readonly tokens: GeneratedToken[];
  readonly ids: TokenId[];
  readonly started: number;
  /** Built at admission (it detokenizes the prompt's tail for context). */
  renderer: PieceRenderer | undefined;
  /** Length of the rendered text already released to onToken. */
  streamed: number;
  stopAt: number | undefined;
  firstTokenAt: number | undefined;
  promptLogprobs: PromptLogprob[] | undefined;
  /** Reported as usage's cached tokens. */
  cachedTokens: number;
  drafted: number;
  accepted: number;
  readonly acceptedDraftPositions: number[];
  /** stepGreedily's prefill stops of the prompt not decoded yet (one a step); empty once its first token is out. */
  prefill: PrefillStop[];
  resolve: (result: GenerationResult) => void;
  reject: (error: unknown) => void;
  /** Its id in the step trace (0 without one). */
  readonly traceId: number;
}

/**
 * A greedy step of at least this many tokens runs on a worker thread, so that requests arriving
 * meanwhile are read and queued for the next step: a few milliseconds of compute even on the tiny
 * fixtures. A shorter one stays on the JavaScript thread: the two thread wake-ups of a hop cost
 * more than they save there — on a loaded 2-core machine, with every prefill of 32 tokens off the
 * thread, output tok/s fell to about half of llama-server's (docs/performance.md).
 */
const OFF_THREAD_TOKENS = 256;

/** The whole next-token distribution as node-llama-cpp gives it (a Map of the vocabulary): where the addon does not reach the context, for sampling and for log-probs. */
const PROBE = { generateNext: { probabilities: true } } as const;
/**
 * The whole next-token distribution as the output's logits row (a Float32Array): where the addon
 * reaches the context, for sampling and for log-probs. node-llama-cpp has no such probe: a
 * confidence-only one is answered by sampling-order.ts with the row, in the `confidence` field
 * that node-llama-cpp passes through untouched. No softmax, no Map of the vocabulary.
 */
const ROW = { generateNext: { confidence: true } } as const;
/**
 * Greedy without log-probs: llama.cpp's own argmax over the logits (node-llama-cpp's sampler at
 * temperature 0 is its greedy sampler alone). No distribution crosses into JavaScript, which was
 * most of a decode step's cost (docs/performance.md).
 */
const GREEDY = { generateNext: { token: true } } as const;
type Probe = typeof PROBE | typeof ROW | typeof GREEDY;

/** How many top log-probs a greedy request's generated tokens carry (1 where it asked for its tokens' own only: greedy's token is the top-1). */
function greedyTopK(request: GenerationRequest): number {
  return request.logprobs > 0 ? request.logprobs : request.tokenLogprobs ? 1 : 0;
}

/** A greedy request stepGreedily decodes: plain, or asking for its generated tokens' log-probs (their top-k computed in native code, never a vocabulary-sized Map). */
function isNativeGreedy(request: GenerationRequest): boolean {
  return request.sampling.temperature === 0 && request.promptLogprobs === 0 && request.maxTokens > 0;
}

/** GREEDY is the only token-only probe: sampling-order.ts takes its argmax without a sampler. ROW needs the addon (`rows`). */
function probeFor(request: GenerationRequest, rows: boolean): Probe {
  return request.sampling.temperature === 0 && !request.tokenLogprobs && request.logprobs === 0 ? GREEDY : rows ? ROW : PROBE;
}

/**
 * How many queued requests a step admits: one. On the CPU a step that prefilled several prompts
 * beside decode tokens took 4-9 ms against 1.1-1.8 ms for one (tiny-random, 4 clients), and every
 * decoding slot and every admitted prompt waited for all of it. An idle engine admits one too:
 * closed-loop clients whose requests ended in the same step send their next ones together, and
 * admitted together they end together again, every round of them waiting for one step of four
 * prompts (the step trace's slowest first tokens); one a step, the first of them streams after a
 * one-prompt step and they stay apart (docs/performance.md, "The 4-client TTFT tail").
 */
export function admissionsThisStep(idleSlots: number, queued: number): number {
  return Math.min(idleSlots, queued, 1);
}

/** A generated token's own log-prob and its distribution's top-k: computed in native code (stepGreedily), or from its row (rowDistribution). */
interface TokenDistribution {
  readonly logprob: number;
  readonly top: TopK;
}

/** A token's log-prob in a row, and the row's top-k (k = 0: an empty one). */
function rowDistribution(row: LogitsRow, id: TokenId, k: number): TokenDistribution {
  const logSumExp = rowLogSumExp(row);
  return { logprob: row[id] - logSumExp, top: k === 0 ? { ids: [], logprobs: [] } : rowTopK(row, k, logSumExp) };
}

interface NextTokenOutput {
  /** `confidence` is ROW's answer: the logits row (the addon's logitsRow), never a number (no probe of ours asks for a confidence). */
  readonly next: { readonly token?: Token | null; readonly probabilities?: Map<Token, number>; readonly confidence?: Float32Array };
  readonly native?: TokenDistribution;
}
/**
 * Continuous batching over one llama.cpp context: N slots are N sequences, a bounded FIFO queue
 * feeds free slots at every step. Each step clears the newly admitted slots (between batches, while
 * nothing decodes), then runs a decode token for every generating slot and prompt tokens for the
 * prefilling ones, as llama-server does: plain greedy requests in one llama_decode of our own
 * (stepGreedily, through native/llama-context; a long step on a worker thread), a long prompt one
 * prefill chunk a step so that admissions and other slots' tokens go on between its chunks; the
 * rest in one batch through node-llama-cpp.
 * Its samplings start only once the batch's outputs are settled (sampling-order.ts):
 * node-llama-cpp's concurrent samplings can otherwise read another sequence's logits after a batch
 * whose outputs llama.cpp reordered (docs/findings.md).
 */
export class BatchEngine {
  private readonly slots: Slot[];
  private readonly queue: Job[] = [];
  private wake: (() => void) | undefined;
  private draining = false;
  private stopped = false;
  private readonly loop: Promise<void>;
  /** How the model's state can be cut back (undefined without the addon: no prompt cache then). */
  private readonly stateKind: StateKind | undefined;
  private admissions = 0;

  constructor(
    private readonly model: LlamaModel,
    context: LlamaContext,
    private readonly native: NativeContext,
    readonly slotCount: number,
    /** Cells per slot: a sequence may not grow past it (llama.cpp would shift its context and go on silently). */
    readonly contextSize: number,
    readonly maxQueue: number,
    private readonly observer: EngineObserver,
    readonly cacheSettings: PromptCacheSettings,
    /** A planted FAULT (tests only); see faults.ts. */
    private readonly fault?: ServerFault,
    /** Speculates plain greedy requests with a draft model (speculation.ts); absent: every token is the target's alone. */
    private readonly speculator?: DraftSpeculator,
    /** `--trace-steps`: one line per step and per request event (step-trace.ts); absent: nothing is timed beyond what runs anyway. */
    private readonly trace?: StepTracer,
  ) {
    orderSampling(context, native);
    this.stateKind = native.reached ? stateKind(native.memoryKind) : undefined;
    this.slots = Array.from({ length: slotCount }, () => {
      const sequence = context.getSequence();
      return { sequence, sequenceId: (sequence as unknown as { _sequenceId: number })._sequenceId, throughNode: false, cache: new SlotCache(), job: undefined };
    });
    this.loop = this.run();
  }

  get activeSlots(): number {
    return this.slots.filter((slot) => slot.job !== undefined).length;
  }

  get queueDepth(): number {
    return this.queue.length;
  }

  get inFlight(): number {
    return this.activeSlots + this.queue.length;
  }

  submit(request: GenerationRequest): Promise<GenerationResult> {
    if (this.draining) throw new EngineDrainingError("the server is draining");
    if (this.inFlight >= this.slotCount + this.maxQueue) {
      this.observer.rejected();
      throw new EngineFullError(`in-flight requests are at the cap (${this.slotCount} slots + ${this.maxQueue} queued)`);
    }
    this.observer.submitted();
    return new Promise<GenerationResult>((resolve, reject) => {
      // An unseeded request's seed: randomInt's widest range (max below 2^48), within what a client may send.
      const seed = request.seed ?? randomInt(2 ** 48 - 1);
      this.queue.push({ request, random: new SamplingRandom(seed), tokens: [], ids: [], started: performance.now(), renderer: undefined, streamed: 0, stopAt: undefined, firstTokenAt: undefined, promptLogprobs: undefined, cachedTokens: 0, drafted: 0, accepted: 0, acceptedDraftPositions: [], prefill: [], resolve, reject, traceId: this.trace?.submitted(request.promptIds, request.traceRequest) ?? 0 });
      this.wake?.();
    });
  }

  /** Stops admitting work and resolves when every in-flight request has finished. */
  async drain(): Promise<void> {
    this.draining = true;
    while (this.inFlight > 0) await sleep(20);
  }

  async close(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.loop;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      this.dropCancelledFromQueue();
      if (this.inFlight === 0) {
        await new Promise<void>((resolve) => { this.wake = resolve; });
        this.wake = undefined;
        continue;
      }
      const started = performance.now();
      const trace = this.trace;
      trace?.stepStarted(started);
      const admitted: Slot[] = [];
      let idle = this.idleSlots();
      const admissions = admissionsThisStep(idle.length, this.queue.length);
      for (; admitted.length < admissions; idle = this.idleSlots()) {
        const job = this.queue.shift()!;
        const slot = chooseSlot(idle, job.request.promptIds, this.caches(job.request));
        slot.job = job;
        slot.cache.lastUsed = ++this.admissions;
        admitted.push(slot);
        trace?.admittedJob(job.traceId);
      }
      for (const slot of admitted) await this.guard(slot, () => (this.decodesNatively(slot.job!.request) ? this.reuse(slot) : this.clear(slot)));
      trace?.phaseEnded("admit");
      // Greedy requests without log-probs go to llama.cpp in one batch of our own (stepGreedily);
      // the rest through node-llama-cpp, awaited together so they share one llama_decode (it batches
      // the calls of one tick). One after the other: never two decodes at once.
      const working = this.slots.filter((slot) => slot.job !== undefined);
      const greedy = working.filter((slot) => this.decodesNatively(slot.job!.request));
      const throughNode = working.filter((slot) => !greedy.includes(slot));
      // A slot past its prompt, not admitted this step: it decodes (or speculates) a token.
      const decodingToken = (slot: Slot) => !admitted.includes(slot) && slot.job!.prefill.length === 0;
      trace?.composition(admitted.length, working.filter(decodingToken).length);
      for (const slot of throughNode) slot.throughNode = true;
      for (const slot of admitted.filter((s) => throughNode.includes(s))) await this.guard(slot, async () => this.scorePromptNatively(slot));
      await Promise.all(throughNode.map((slot) => this.guard(slot, () => (admitted.includes(slot) ? this.prefill(slot) : this.decode(slot)))));
      trace?.phaseEnded("node");
      if (greedy.length > 0) {
        // With a draft model, decoding greedy slots speculate (slots still prefilling step first).
        const speculating = this.speculator === undefined ? [] : greedy.filter(decodingToken);
        if (speculating.length > 0) this.speculate(speculating);
        trace?.phaseEnded("speculate");
        await this.stepGreedily(greedy.filter((slot) => !speculating.includes(slot)), admitted);
        trace?.phaseEnded("settle");
        // After a step on this thread, let sockets flush and requests arrive before the next one.
        await new Promise<void>((resolve) => setImmediate(resolve));
        trace?.phaseEnded("turn");
      }
      // The clients reading what this step streamed share the cores with the next step, which
      // computes on all of them: a reader the writes woke would wait for a scheduler slice (3-4 ms
      // on 2 cores), and that wait is a first token's TTFT or delays a closed-loop client's next
      // request. Yielding the core once lets it run first; nothing waits when no one is ready.
      if (this.native.reached) this.native.yieldCpu();
      trace?.stepEnded();
      this.observer.step((performance.now() - started) / 1000, this.activeSlots, this.queue.length);
    }
  }

  private idleSlots(): Slot[] {
    return this.slots.filter((slot) => slot.job === undefined);
  }

  /**
   * Greedy requests are decoded by stepGreedily, the one path with a prompt cache; with a draft
   * model, only plain ones (a drafted token has no distribution to report). The FAKE slot-clear
   * fault keeps node-llama-cpp's path, which goes on evaluating where an uncleared sequence ended.
   */
  private decodesNatively(request: GenerationRequest): boolean {
    return this.native.reached && this.fault !== "skip-slot-clear" && isNativeGreedy(request) && (this.speculator === undefined || greedyTopK(request) === 0);
  }

  private dropCancelledFromQueue(): void {
    for (let i = this.queue.length - 1; i >= 0; i--) {
      const job = this.queue[i];
      if (job.request.signal.aborted) {
        this.queue.splice(i, 1);
        this.observer.finished("cancelled", undefined, 0);
        job.resolve({ tokens: [], text: "", unstreamedText: "", finishReason: "cancelled", ttftSeconds: undefined, cachedTokens: 0, generatingMs: 0, drafted: 0, accepted: 0, acceptedDraftPositions: [] });
      }
    }
  }

  /** A failing slot fails its own request only; the others keep going. */
  private async guard(slot: Slot, work: () => Promise<void>): Promise<void> {
    try {
      await work();
    } catch (error) {
      this.fail(slot, error);
    }
  }

  private fail(slot: Slot, error: unknown): void {
    const job = slot.job;
    slot.job = undefined;
    // What the sequence holds after a failed step is unknown: the next request starts cold.
    slot.cache.forget();
    if (job !== undefined) this.observer.errored();
    job?.reject(error);
  }

  /** A reused slot must start from nothing: for hybrid and recurrent models this also resets the recurrent and conv state (node-llama-cpp drops the whole sequence when its first cell goes). */
  private async clear(slot: Slot): Promise<void> {
    this.observer.prompt(slot.job!.request.promptIds.length, 0, slot.job!.request.promptIds.length);
    if (this.fault === "skip-slot-clear") return;
    // node-llama-cpp erases only the tokens it evaluated itself; stepGreedily's are ours to erase.
    if (slot.throughNode || !this.native.reached) await slot.sequence.clearHistory();
    slot.throughNode = false;
    slot.cache.forget();
    if (this.native.reached) this.native.clearSequence(slot.sequenceId);
  }

  /** Whether this request may reuse what a slot holds: the server's prompt cache is on and the request did not ask for a cold prompt. */
  private caches(request: GenerationRequest): boolean {
    return this.cacheSettings.promptCache && request.cachePrompt !== false;
  }

  /**
   * A plain greedy request keeps what its slot's sequence holds of the longest prefix it shares
   * with the prompt (prompt-cache.ts says when that is valid), so stepGreedily prefills only the rest.
   */
  private async reuse(slot: Slot): Promise<void> {
    const job = slot.job!;
    if (slot.throughNode) {
      await slot.sequence.clearHistory();
      slot.throughNode = false;
    }
    if (!this.native.reached || this.stateKind === undefined) throw new Error("the prompt cache needs the llama-context addon");
    let reused = 0;
    if (this.caches(job.request)) {
      reused = reusePrefix(this.native, slot, this.slots.filter((other) => other !== slot), job.request.promptIds, this.stateKind, this.fault);
    } else {
      slot.cache.forget();
      this.native.clearSequence(slot.sequenceId);
    }
    job.cachedTokens = this.fault === "reuse-not-reported" ? 0 : reused;
    if (this.fault === "report-hits-no-reuse") {
      // FAULT: the hit is reported, and everything is prefilled again anyway.
      slot.cache.forget();
      this.native.clearSequence(slot.sequenceId);
    }
    // stepGreedily prefills the prompt from where the slot's cache ends.
    this.observer.prompt(job.request.promptIds.length, job.cachedTokens, job.request.promptIds.length - slot.cache.tokens.length);
  }

  /**
   * An echoed prompt's own log-probs (promptLogprobs > 0), from the addon's top-k in native code:
   * node-llama-cpp would hand over each position's whole vocabulary as a Map, which at a 152k
   * vocabulary costs far more than the forward pass. The prompt is decoded here into the cleared
   * sequence and cleared again, so node-llama-cpp then prefills it as if for the first time (twice
   * the forward pass, none of the Maps). Before any node-llama-cpp evaluation of the step starts.
   */
  private scorePromptNatively(slot: Slot): void {
    const job = slot.job!;
    const k = job.request.promptLogprobs;
    // The FAKE uncleared slot must keep its stale cells: decoding over them here would hide the fault.
    if (k === 0 || !this.native.reached || this.fault === "skip-slot-clear") return;
    const { rows, next } = teacherForceInEmptySequence(this.native, slot.sequenceId, job.request.promptIds, 0, k);
    // FAULT echo-one-late: each position reads the row after its own (the last keeps its own).
    const row = (i: number) => (this.fault === "echo-one-late" ? Math.min(i + 1, rows.length - 2) : i);
    job.promptLogprobs = rows.slice(0, -1).map((_, i) => ({ logprob: next[row(i)], top: rows[row(i)] }));
  }

  private async prefill(slot: Slot): Promise<void> {
    const job = slot.job!;
    const { request } = job;
    const prompt = request.promptIds as Token[];
    // Without the addon, node-llama-cpp's distributions at every position.
    const withPromptLogprobs = request.promptLogprobs > 0 && job.promptLogprobs === undefined;
    const last = prompt.length - 1;
    const input = prompt.map((id, i) => (i === last ? ([id, probeFor(request, this.native.reached)] as [Token, Probe]) : withPromptLogprobs ? ([id, PROBE] as [Token, Probe]) : id));
    // The prompt in prefill chunks, one evaluation each. controlledEvaluate answers a sparse array,
    // set only where an input asked for an output (and only as long as its last such index), so a
    // chunk's outputs are placed by their index in the prompt: appended, a chunk that asked for
    // none added nothing and the last token's output landed short of `last`.
    const output: (NextTokenOutput | undefined)[] = [];
    for (let start = 0; start < input.length; start += this.cacheSettings.prefillChunk) {
      const chunk = await slot.sequence.controlledEvaluate(input.slice(start, start + this.cacheSettings.prefillChunk)) as (NextTokenOutput | undefined)[];
      chunk.forEach((item, i) => { output[start + i] = item; });
    }
    if (withPromptLogprobs) {
      job.promptLogprobs = prompt.slice(1).map((id, i) => {
        const probabilities = output[i]!.next.probabilities!;
        return { logprob: Math.log(probabilities.get(id) ?? 0), top: topKFromProbabilities(probabilities, request.promptLogprobs) };
      });
    }
    job.renderer = new PieceRenderer(this.model, request.promptIds.slice(-8));
    if (request.maxTokens === 0) return this.finish(slot, "length");
    this.accept(slot, output[last]!);
  }

  /**
   * One step for greedy requests without log-probs, as llama-server's loop runs it: every
   * generating slot's last token and every prefilling slot's next prompt stretch (up to a prefill
   * chunk, or a checkpoint) in one llama_decode, and each finished prompt's or decoded token's
   * argmax, through our addon — no sampler. A prompt longer than a chunk takes several steps, so
   * requests admitted meanwhile and the other slots' tokens do not wait for all of it. A failure
   * fails these requests only.
   */
  private async stepGreedily(slots: readonly Slot[], admitted: readonly Slot[]): Promise<void> {
    const live = slots.filter((slot) => {
      if (!slot.job!.request.signal.aborted) return true;
      this.finish(slot, "cancelled");
      return false;
    });
    if (live.length === 0 || !this.native.reached) return;
    const native = this.native;
    // Checkpoints only where the state cannot be cut back, and only for a cache that will use them.
    const checkpointed = this.cacheSettings.promptCache && this.stateKind !== "attention";
    for (const slot of live.filter((s) => admitted.includes(s))) {
      const job = slot.job!;
      // The uncached rest of an admitted prompt, split at its prefill stops (chunk edges, checkpoints).
      job.prefill = prefillStops(slot.cache.tokens.length, job.request.promptIds.length, this.cacheSettings.prefillChunk, checkpointed, this.fault);
      job.renderer = new PieceRenderer(this.model, job.request.promptIds.slice(-8));
    }
    // A generating slot's stretch is its last sampled token; a prefilling slot's, its prompt up to the next stop.
    const entries = live.map((slot, index) => {
      const job = slot.job!;
      const start = slot.cache.tokens.length;
      const prefilling = job.prefill.length > 0;
      const stop = job.prefill[0] ?? { end: start + 1, checkpointAs: undefined, chunkEdge: false };
      const piece = prefilling ? job.request.promptIds.slice(start, stop.end) : [job.ids[job.ids.length - 1]];
      return { slot, index, start, piece, stop, prefilling };
    });
    let decoded: Int32Array;
    let distributions: ((index: number) => TokenDistribution | undefined) | undefined;
    try {
      const step = [
        Int32Array.from(entries, (e) => e.slot.sequenceId),
        Int32Array.from(entries, (e) => e.piece.length),
        Int32Array.from(entries.flatMap((e) => e.piece)),
        Int32Array.from(entries, (e) => e.start),
        this.cacheSettings.prefillChunk,
      ] as const;
      const offThread = entries.reduce((sum, e) => sum + e.piece.length, 0) >= OFF_THREAD_TOKENS;
      // Only an output that becomes a token (not a prompt stretch short of the prompt's end) is ranked.
      const topK = Int32Array.from(entries, (e) => (e.prefilling && e.slot.job!.prefill.length > 1 ? 0 : greedyTopK(e.slot.job!.request)));
      this.trace?.decodeStarted(entries, offThread);
      if (topK.some((k) => k > 0)) {
        const result = await native.decodeGreedyTopK(...step, topK, offThread);
        decoded = result.next;
        distributions = greedyStepDistributions(result, topK);
        if (this.fault === "logprobs-other-row") distributions = readNextRankedRow(distributions, topK);
      } else {
        decoded = offThread ? await native.decodeGreedyOffThread(...step) : native.decodeGreedy(...step);
      }
      this.trace?.phaseEnded("decode");
    } catch (error) {
      for (const slot of live) this.fail(slot, error);
      return;
    }
    // Prefilling slots are settled first, so a prompt that finished here streams its first token
    // ahead of the other slots' tokens: Node flushes each response's socket in the order of its first
    // write in this turn, and a loopback write took ~0.14 ms on the loaded 2-core box (docs/performance.md).
    for (const e of [...entries.filter((e) => e.prefilling), ...entries.filter((e) => !e.prefilling)]) {
      const job = e.slot.job!;
      e.slot.cache.tokens.push(...e.piece);
      try {
        if (e.stop.checkpointAs !== undefined) {
          const data = native.saveCheckpoint(e.slot.sequenceId);
          const misfiled = e.stop.checkpointAs !== e.stop.end && this.stateKind === "recurrent";
          e.slot.cache.keep({ tokens: e.stop.checkpointAs, data: misfiled ? misfiledCheckpoint(data, e.stop.checkpointAs) : data });
        }
        // FAULT: the next chunk is evaluated as if it began a new sequence (the recurrent conv and SSM state, and the earlier chunks' cells, are dropped).
        if (this.fault === "chunk-drops-conv" && e.stop.chunkEdge) native.clearSequence(e.slot.sequenceId);
        if (e.prefilling) job.prefill.shift();
        // A stretch short of the prompt's end gives no token yet.
        if (e.prefilling && job.prefill.length > 0) continue;
        this.accept(e.slot, { next: { token: decoded[e.index] as Token }, native: distributions?.(e.index) });
      } catch (error) {
        this.fail(e.slot, error);
      }
    }
  }

  /**
   * One speculative step for decoding greedy slots (speculation.ts): each emits the drafts its
   * target kept and the target's own next token, through accept as any token (a stop or max_tokens
   * ends it mid-way). A failure fails these requests only.
   */
  private speculate(slots: readonly Slot[]): void {
    const live = slots.filter((slot) => {
      if (!slot.job!.request.signal.aborted) return true;
      this.finish(slot, "cancelled");
      return false;
    });
    if (live.length === 0) return;
    let outcomes: SpeculationOutcome[];
    try {
      outcomes = this.speculator!.step(live.map((slot) => {
        const { request, ids } = slot.job!;
        const context = [...request.promptIds, ...ids];
        // Every emitted token must fit max_tokens, and every drafted position a cell of the slot.
        return { sequenceId: slot.sequenceId, cache: slot.cache, context, room: Math.min(request.maxTokens - ids.length - 1, this.contextSize - context.length) };
      }));
    } catch (error) {
      for (const slot of live) this.fail(slot, error);
      return;
    }
    live.forEach((slot, i) => {
      const job = slot.job!;
      const { tokens, drafted, accepted } = outcomes[i];
      job.drafted += drafted;
      job.accepted += accepted;
      this.observer.speculated(drafted, accepted);
      try {
        for (const [t, token] of tokens.entries()) {
          if (slot.job !== job) break;
          if (t < accepted) job.acceptedDraftPositions.push(job.ids.length);
          this.accept(slot, { next: { token: token as Token } });
        }
      } catch (error) {
        this.fail(slot, error);
      }
    });
  }

  private async decode(slot: Slot): Promise<void> {
    const job = slot.job!;
    if (job.request.signal.aborted) return this.finish(slot, "cancelled");
    const output = await slot.sequence.controlledEvaluate([[job.ids[job.ids.length - 1] as Token, probeFor(job.request, this.native.reached)]]) as (NextTokenOutput | undefined)[];
    this.accept(slot, output[0]!);
  }

  private accept(slot: Slot, output: NextTokenOutput): void {
    const job = slot.job!;
    const { request } = job;
    if (request.signal.aborted) return this.finish(slot, "cancelled");
    const { probabilities, confidence } = output.next;
    const row = confidence ?? (probabilities === undefined ? undefined : rowFromProbabilities(probabilities));
    const id = row === undefined ? output.next.token : sampleToken(row, request.sampling, job.random);
    if (id === undefined || id === null) throw new Error("llama.cpp sampled no token");
    job.ids.push(id);
    const piece = job.renderer!.push(id);
    const text = job.renderer!.rendered;
    const { stopAt, safeEnd } = scanStops(text, request.stop);
    // A row's log-probs only where the request asked for them: their normaliser is a pass over the vocabulary.
    const distribution = output.native ?? (row === undefined || !request.tokenLogprobs ? undefined : rowDistribution(row, id, request.logprobs));
    const token: GeneratedToken = {
      id,
      piece,
      text: text.slice(job.streamed, Math.max(job.streamed, safeEnd)),
      ...(distribution === undefined ? {} : { logprob: distribution.logprob }),
      ...(request.logprobs === 0 || distribution === undefined ? {} : { top: distribution.top }),
    };
    // Nothing reads the row after this: the addon fills it again for a later token.
    if (confidence !== undefined && this.native.reached) this.native.recycleRow(confidence);
    job.streamed = Math.max(job.streamed, safeEnd);
    if (job.firstTokenAt === undefined) {
      job.firstTokenAt = performance.now();
    }
    job.tokens.push(token);
    request.onToken?.(token);
    if (job.tokens.length === 1) this.trace?.firstToken(job.traceId, job.firstTokenAt);
    const eos = !request.ignoreEos && id === this.model.tokens.eos;
    if (eos || stopAt !== undefined) {
      job.stopAt = stopAt;
      return this.finish(slot, "stop");
    }
    // The token just sampled is evaluated next step: stop while it still has a cell.
    if (job.ids.length >= request.maxTokens || request.promptIds.length + job.ids.length >= this.contextSize) this.finish(slot, "length");
  }

  private finish(slot: Slot, reason: FinishReason): void {
    const job = slot.job!;
    slot.job = undefined;
    const rendered = job.renderer?.rendered ?? "";
    const text = job.stopAt === undefined ? rendered : rendered.slice(0, job.stopAt);
    const ttftSeconds = job.firstTokenAt === undefined ? undefined : (job.firstTokenAt - job.started) / 1000;
    this.observer.finished(reason, ttftSeconds, job.tokens.length);
    const generatingMs = job.firstTokenAt === undefined ? 0 : performance.now() - job.firstTokenAt;
    job.resolve({
      tokens: job.tokens, text, unstreamedText: text.slice(job.streamed), finishReason: reason, promptLogprobs: job.promptLogprobs, ttftSeconds, cachedTokens: job.cachedTokens,
      generatingMs, drafted: job.drafted, accepted: job.accepted, acceptedDraftPositions: job.acceptedDraftPositions,
    });
  }
}
