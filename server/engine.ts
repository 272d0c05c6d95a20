import { setTimeout as sleep } from "node:timers/promises";
import { performance } from "node:perf_hooks";
import { randomInt } from "node:crypto";
import type { LlamaContext, LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import { SeededRandom } from "../harness/fixtures/seeded-random.js";
import { topKFromProbabilities } from "../harness/sut/topk.js";
import type { TokenId, TopK } from "../harness/sut/types.js";
import type { ServerFault } from "./faults.js";
import { sampleToken, type SamplingParams } from "./sampling.js";

export type FinishReason = "stop" | "length" | "cancelled";

export interface GenerationRequest {
  readonly promptIds: readonly TokenId[];
  readonly maxTokens: number;
  readonly sampling: SamplingParams;
  /** Same seed, same tokens; absent: a random seed. */
  readonly seed?: number;
  readonly stop: readonly string[];
  readonly ignoreEos: boolean;
  /** Top-k log-probs per generated token (0: none). */
  readonly logprobs: number;
  /** Top-k log-probs for every prompt position after the first (0: none): teacher forcing over HTTP. */
  readonly promptLogprobs: number;
  readonly signal: AbortSignal;
  /** Called for every generated token as it is produced (streaming). */
  readonly onToken?: (token: GeneratedToken) => void;
}

export interface GeneratedToken {
  readonly id: TokenId;
  /** Text this token adds to the output (may be empty until a multi-byte character completes). */
  readonly text: string;
  readonly logprob: number;
  readonly top?: TopK;
}

export interface GenerationResult {
  readonly tokens: readonly GeneratedToken[];
  readonly text: string;
  readonly finishReason: FinishReason;
  readonly promptTop?: readonly TopK[];
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
  job: Job | undefined;
}

interface Job {
  readonly request: GenerationRequest;
  readonly random: SeededRandom;
  readonly tokens: GeneratedToken[];
  readonly ids: TokenId[];
  readonly started: number;
  text: string;
  firstTokenAt: number | undefined;
  promptTop: TopK[] | undefined;
  resolve: (result: GenerationResult) => void;
  reject: (error: unknown) => void;
}

const PROBE = { generateNext: { probabilities: true } } as const;

/**
 * Continuous batching over one llama.cpp context: N slots are N sequences, a bounded FIFO queue
 * feeds free slots at every step. Each step first prefills newly admitted requests one at a time,
 * then runs one batch holding a decode token for every other active slot. In node-llama-cpp 3.21.1
 * a batch that mixes prefill with decode, or holds several prefills, sometimes gave wrong tokens
 * (README, "Findings"); decode-only batches did not.
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
    readonly slotCount: number,
    readonly maxQueue: number,
    private readonly observer: EngineObserver,
    /** A planted FAULT (tests only); see faults.ts. */
    private readonly fault?: ServerFault,
  ) {
    this.slots = Array.from({ length: slotCount }, () => ({ sequence: context.getSequence(), job: undefined }));
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
      this.queue.push({ request, random: new SeededRandom(seed), tokens: [], ids: [], started: performance.now(), text: "", firstTokenAt: undefined, promptTop: undefined, resolve, reject });
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
      for (const slot of admitted) await this.guard(slot, () => this.prefill(slot));
      const decoding = this.slots.filter((slot) => slot.job !== undefined && !admitted.includes(slot));
      await Promise.all(decoding.map((slot) => this.guard(slot, () => this.decode(slot))));
      this.observer.step((performance.now() - started) / 1000, this.activeSlots, this.queue.length);
    }
  }

  private dropCancelledFromQueue(): void {
    for (let i = this.queue.length - 1; i >= 0; i--) {
      const job = this.queue[i];
      if (job.request.signal.aborted) {
        this.queue.splice(i, 1);
        this.observer.finished("cancelled", undefined, 0);
        job.resolve({ tokens: [], text: "", finishReason: "cancelled", ttftSeconds: undefined });
      }
    }
  }

  /** A failing slot fails its own request only; the others keep going. */
  private async guard(slot: Slot, work: () => Promise<void>): Promise<void> {
    try {
      await work();
    } catch (error) {
      const job = slot.job;
      slot.job = undefined;
      if (job !== undefined) this.observer.errored();
      job?.reject(error);
    }
  }

  private async prefill(slot: Slot): Promise<void> {
    const job = slot.job!;
    const { request } = job;
    // A reused slot must start from nothing: for hybrid and recurrent models this also resets the
    // recurrent and conv state (node-llama-cpp drops the whole sequence when its first cell goes).
    if (this.fault !== "skip-slot-clear") await slot.sequence.clearHistory();
    const prompt = request.promptIds as Token[];
    const withPromptTop = request.promptLogprobs > 0;
    const input = prompt.map((id, i) => (i === prompt.length - 1 || (withPromptTop && i < prompt.length - 1) ? ([id, PROBE] as [Token, typeof PROBE]) : id));
    const output = await slot.sequence.controlledEvaluate(input);
    if (withPromptTop) {
      job.promptTop = prompt.slice(0, -1).map((_, i) => topKFromProbabilities(output[i]!.next.probabilities!, request.promptLogprobs));
    }
    if (request.maxTokens === 0) return this.finish(slot, "length");
    this.accept(slot, output[output.length - 1]!.next.probabilities!);
  }

  private async decode(slot: Slot): Promise<void> {
    const job = slot.job!;
    if (job.request.signal.aborted) return this.finish(slot, "cancelled");
    const output = await slot.sequence.controlledEvaluate([[job.ids[job.ids.length - 1] as Token, PROBE]]);
    this.accept(slot, output[0]!.next.probabilities!);
  }

  private accept(slot: Slot, probabilities: Map<Token, number>): void {
    const job = slot.job!;
    const { request } = job;
    if (request.signal.aborted) return this.finish(slot, "cancelled");
    const id = sampleToken(probabilities, request.sampling, job.random);
    job.ids.push(id);
    // Text is needed per token only to stream it or to look for stop strings; else once at the end.
    const needsText = request.onToken !== undefined || request.stop.length > 0;
    const text = needsText ? this.model.detokenize(job.ids as Token[]) : job.text;
    const token: GeneratedToken = {
      id,
      text: text.slice(job.text.length),
      logprob: Math.log(probabilities.get(id as Token) ?? 0),
      ...(request.logprobs > 0 ? { top: topKFromProbabilities(probabilities, request.logprobs) } : {}),
    };
    job.text = text;
    job.firstTokenAt ??= performance.now();
    job.tokens.push(token);
    request.onToken?.(token);
    const eos = !request.ignoreEos && id === this.model.tokens.eos;
    const stopAt = request.stop.map((s) => job.text.indexOf(s)).filter((i) => i >= 0);
    if (eos || stopAt.length > 0) {
      if (stopAt.length > 0) job.text = job.text.slice(0, Math.min(...stopAt));
      return this.finish(slot, "stop");
    }
    if (job.ids.length >= request.maxTokens) this.finish(slot, "length");
  }

  private finish(slot: Slot, reason: FinishReason): void {
    const job = slot.job!;
    slot.job = undefined;
    if (job.request.onToken === undefined && job.request.stop.length === 0) job.text = this.model.detokenize(job.ids as Token[]);
    const ttftSeconds = job.firstTokenAt === undefined ? undefined : (job.firstTokenAt - job.started) / 1000;
    this.observer.finished(reason, ttftSeconds, job.tokens.length);
    job.resolve({ tokens: job.tokens, text: job.text, finishReason: reason, promptTop: job.promptTop, ttftSeconds });
  }
}
