import { setTimeout as sleep } from "node:timers/promises";
import { performance } from "node:perf_hooks";
import { randomInt } from "node:crypto";
import type { LlamaContext, LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import { SeededRandom } from "../harness/fixtures/seeded-random.js";
import { topKFromProbabilities } from "../harness/sut/topk.js";
import type { TokenId, TopK } from "../harness/sut/types.js";
import type { ServerFault } from "./faults.js";
import { sampleToken, type SamplingParams } from "./sampling.js";
import { scanStops } from "./stop-strings.js";
import { PieceRenderer } from "./token-text.js";
import { orderSampling } from "./sampling-order.js";
import type { NativeContext } from "../harness/sut/llamacpp-native-context.js";

export type FinishReason = "stop" | "length" | "cancelled";

export interface GenerationRequest {
  readonly promptIds: readonly TokenId[];
  readonly maxTokens: number;
  readonly sampling: SamplingParams;
  /** Same seed, same tokens; absent: a random seed. */
  readonly seed?: number;
  readonly stop: readonly string[];
  readonly ignoreEos: boolean;
  /** Whether each generated token carries its own log-prob. */
  readonly tokenLogprobs: boolean;
  /** Top-k log-probs per generated token (0: none). */
  readonly logprobs: number;
  /** Log-probs for every prompt position after the first, with this many top-k (0: none): echo, teacher forcing over HTTP. */
  readonly promptLogprobs: number;
  readonly signal: AbortSignal;
  /** Called for every generated token as it is produced (streaming). */
  readonly onToken?: (token: GeneratedToken) => void;
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
  readonly step: (seconds: number, activeSlots: number, queueDepth: number) => void;
}

interface Slot {
  readonly sequence: LlamaContextSequence;
  /** llama.cpp's sequence id (node-llama-cpp's, internal in its typings), for decodes outside it. */
  readonly sequenceId: number;
  /** Whether node-llama-cpp evaluated tokens in it since it was last cleared (its clearHistory is then needed). */
  throughNode: boolean;
  /** Where stepGreedily's next token goes: the cells it filled since the slot was last cleared. */
  nextPosition: number;
  job: Job | undefined;
}

interface Job {
  readonly request: GenerationRequest;
  readonly random: SeededRandom;
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
  resolve: (result: GenerationResult) => void;
  reject: (error: unknown) => void;
}

/** The whole next-token distribution: for sampling at temperature > 0, and for log-probs. */
const PROBE = { generateNext: { probabilities: true } } as const;
/**
 * Greedy without log-probs: llama.cpp's own argmax over the logits (node-llama-cpp's sampler at
 * temperature 0 is its greedy sampler alone). No distribution crosses into JavaScript, which was
 * most of a decode step's cost (docs/performance.md).
 */
const GREEDY = { generateNext: { token: true } } as const;
type Probe = typeof PROBE | typeof GREEDY;

/**
 * Greedy, no log-probs of any kind, at least one token to generate: the engine decodes it outside
 * node-llama-cpp when the addon is there (stepGreedily).
 */
function isPlainGreedy(request: GenerationRequest): boolean {
  return probeFor(request) === GREEDY && request.promptLogprobs === 0 && request.maxTokens > 0;
}

/** GREEDY is the only token-only probe: sampling-order.ts takes its argmax without a sampler. */
function probeFor(request: GenerationRequest): Probe {
  return request.sampling.temperature === 0 && !request.tokenLogprobs && request.logprobs === 0 ? GREEDY : PROBE;
}

interface NextTokenOutput {
  readonly next: { readonly token?: Token | null; readonly probabilities?: Map<Token, number> };
}
/**
 * Continuous batching over one llama.cpp context: N slots are N sequences, a bounded FIFO queue
 * feeds free slots at every step. Each step clears the newly admitted slots (between batches, while
 * nothing decodes), then runs every admitted prompt's prefill and a decode token for every other
 * active slot, as llama-server does: plain greedy requests in one llama_decode of our own
 * (stepGreedily, through native/llama-context), the rest in one batch through node-llama-cpp.
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

  constructor(
    private readonly model: LlamaModel,
    context: LlamaContext,
    private readonly native: NativeContext,
    readonly slotCount: number,
    /** Cells per slot: a sequence may not grow past it (llama.cpp would shift its context and go on silently). */
    readonly contextSize: number,
    readonly maxQueue: number,
    private readonly observer: EngineObserver,
    /** A planted FAULT (tests only); see faults.ts. */
    private readonly fault?: ServerFault,
  ) {
    orderSampling(context, native);
    this.slots = Array.from({ length: slotCount }, () => {
      const sequence = context.getSequence();
      return { sequence, sequenceId: (sequence as unknown as { _sequenceId: number })._sequenceId, throughNode: false, nextPosition: 0, job: undefined };
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
      const seed = request.seed ?? randomInt(2 ** 31);
      this.queue.push({ request, random: new SeededRandom(seed), tokens: [], ids: [], started: performance.now(), renderer: undefined, streamed: 0, stopAt: undefined, firstTokenAt: undefined, promptLogprobs: undefined, resolve, reject });
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
      const admitted: Slot[] = [];
      for (const slot of this.slots) {
        if (slot.job === undefined && this.queue.length > 0) {
          slot.job = this.queue.shift();
          admitted.push(slot);
        }
      }
      for (const slot of admitted) await this.guard(slot, () => this.clear(slot));
      // Greedy requests without log-probs go to llama.cpp in one batch of our own (stepGreedily);
      // the rest through node-llama-cpp, awaited together so they share one llama_decode (it batches
      // the calls of one tick). One after the other: never two decodes at once.
      const working = this.slots.filter((slot) => slot.job !== undefined);
      // The FAKE slot-clear fault keeps node-llama-cpp's path, which goes on evaluating where an uncleared sequence ended.
      const greedy = this.native.reached && this.fault === undefined ? working.filter((slot) => isPlainGreedy(slot.job!.request)) : [];
      const throughNode = working.filter((slot) => !greedy.includes(slot));
      for (const slot of throughNode) slot.throughNode = true;
      await Promise.all(throughNode.map((slot) => this.guard(slot, () => (admitted.includes(slot) ? this.prefill(slot) : this.decode(slot)))));
      if (greedy.length > 0) {
        this.stepGreedily(greedy, admitted);
        // The step ran on this thread: let sockets flush and requests arrive before the next one.
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
      this.observer.step((performance.now() - started) / 1000, this.activeSlots, this.queue.length);
    }
  }

  private dropCancelledFromQueue(): void {
    for (let i = this.queue.length - 1; i >= 0; i--) {
      const job = this.queue[i];
      if (job.request.signal.aborted) {
        this.queue.splice(i, 1);
        this.observer.finished("cancelled", undefined, 0);
        job.resolve({ tokens: [], text: "", unstreamedText: "", finishReason: "cancelled", ttftSeconds: undefined });
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
    if (job !== undefined) this.observer.errored();
    job?.reject(error);
  }

  /** A reused slot must start from nothing: for hybrid and recurrent models this also resets the recurrent and conv state (node-llama-cpp drops the whole sequence when its first cell goes). */
  private async clear(slot: Slot): Promise<void> {
    if (this.fault === "skip-slot-clear") return;
    // node-llama-cpp erases only the tokens it evaluated itself; stepGreedily's are ours to erase.
    if (slot.throughNode || !this.native.reached) await slot.sequence.clearHistory();
    slot.throughNode = false;
    slot.nextPosition = 0;
    if (this.native.reached) this.native.clearSequence(slot.sequenceId);
  }

  private async prefill(slot: Slot): Promise<void> {
    const job = slot.job!;
    const { request } = job;
    const prompt = request.promptIds as Token[];
    const withPromptLogprobs = request.promptLogprobs > 0;
    const last = prompt.length - 1;
    const input = prompt.map((id, i) => (i === last ? ([id, probeFor(request)] as [Token, Probe]) : withPromptLogprobs ? ([id, PROBE] as [Token, Probe]) : id));
    const output = await slot.sequence.controlledEvaluate(input) as (NextTokenOutput | undefined)[];
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
   * One step for greedy requests without log-probs, as llama-server runs it: the admitted ones'
   * prompts and the others' last tokens in one llama_decode, and each sequence's argmax, through
   * our addon on this thread — no sampler, no thread hop. A failure fails these requests only.
   */
  private stepGreedily(slots: readonly Slot[], admitted: readonly Slot[]): void {
    const live = slots.filter((slot) => {
      if (!slot.job!.request.signal.aborted) return true;
      this.finish(slot, "cancelled");
      return false;
    });
    if (live.length === 0 || !this.native.reached) return;
    // An admitted prompt goes in whole, a decoding slot's last sampled token alone, each where the slot's cells end.
    const pending = live.map((slot) => {
      const job = slot.job!;
      const tokens = admitted.includes(slot) ? job.request.promptIds : [job.ids[job.ids.length - 1]];
      const start = slot.nextPosition;
      slot.nextPosition += tokens.length;
      return { tokens, start };
    });
    let next: Int32Array;
    try {
      next = this.native.decodeGreedy(
        Int32Array.from(live, (slot) => slot.sequenceId),
        Int32Array.from(pending, (p) => p.tokens.length),
        Int32Array.from(pending.flatMap((p) => p.tokens)),
        Int32Array.from(pending, (p) => p.start),
      );
    } catch (error) {
      for (const slot of live) this.fail(slot, error);
      return;
    }
    live.forEach((slot, i) => {
      try {
        if (admitted.includes(slot)) slot.job!.renderer = new PieceRenderer(this.model, slot.job!.request.promptIds.slice(-8));
        this.accept(slot, { next: { token: next[i] as Token } });
      } catch (error) {
        this.fail(slot, error);
      }
    });
  }

  private async decode(slot: Slot): Promise<void> {
    const job = slot.job!;
    if (job.request.signal.aborted) return this.finish(slot, "cancelled");
    const output = await slot.sequence.controlledEvaluate([[job.ids[job.ids.length - 1] as Token, probeFor(job.request)]]) as (NextTokenOutput | undefined)[];
    this.accept(slot, output[0]!);
  }

  private accept(slot: Slot, output: NextTokenOutput): void {
    const job = slot.job!;
    const { request } = job;
    if (request.signal.aborted) return this.finish(slot, "cancelled");
    const { probabilities } = output.next;
    const id = probabilities === undefined ? output.next.token : sampleToken(probabilities, request.sampling, job.random);
    if (id === undefined || id === null) throw new Error("llama.cpp sampled no token");
    job.ids.push(id);
    const piece = job.renderer!.push(id);
    const text = job.renderer!.rendered;
    const { stopAt, safeEnd } = scanStops(text, request.stop);
    const token: GeneratedToken = {
      id,
      piece,
      text: text.slice(job.streamed, Math.max(job.streamed, safeEnd)),
      ...(probabilities === undefined ? {} : { logprob: Math.log(probabilities.get(id as Token) ?? 0) }),
      ...(request.logprobs > 0 && probabilities !== undefined ? { top: topKFromProbabilities(probabilities, request.logprobs) } : {}),
    };
    job.streamed = Math.max(job.streamed, safeEnd);
    job.firstTokenAt ??= performance.now();
    job.tokens.push(token);
    request.onToken?.(token);
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
    job.resolve({ tokens: job.tokens, text, unstreamedText: text.slice(job.streamed), finishReason: reason, promptLogprobs: job.promptLogprobs, ttftSeconds });
  }
}
