import { setTimeout as sleep } from "node:timers/promises";
import { performance } from "node:perf_hooks";
import { randomInt } from "node:crypto";
import type { LlamaContext, LlamaModel } from "node-llama-cpp";
import { sequenceIdOf, type NativeContext } from "../harness/sut/llamacpp-native-context.js";
import type { ServerFault } from "./faults.js";
import { EngineDrainingError, EngineFullError, type EngineObserver, type GenerationRequest, type GenerationResult } from "./generation.js";
import { decodesInBatchStep, isPlainGreedy, stepBatch } from "./batch-step.js";
import { decodeThroughNode, prefillThroughNode, scorePromptNatively } from "./node-evaluation.js";
import { HostPromptCache, type HostCacheStats } from "./host-prompt-cache.js";
import { cachesRequest, chooseSlot, prefillPlan, SlotCache, stateKind, type PromptCacheSettings } from "./prompt-cache.js";
import { orderSampling } from "./sampling-order.js";
import { CANCELLED_IN_QUEUE, clearSlot, failSlot, newJob, reuseSlot, type EngineShared, type Job, type Slot } from "./slot.js";
import { speculateSlots, type DraftSpeculator } from "./speculation.js";
import type { StepTracer } from "./step-trace.js";

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

/**
 * Continuous batching over one llama.cpp context: N slots are N sequences, a bounded FIFO queue
 * feeds free slots at every step. Each step clears the newly admitted slots (between batches, while
 * nothing decodes), then runs a decode token for every generating slot and prompt tokens for the
 * prefilling ones, as llama-server does: greedy and sampled requests in one llama_decode of our own
 * (batch-step.ts; a long step on a worker thread), a long prompt one prefill chunk a step so that
 * admissions and other slots' tokens go on between its chunks; the rest in one batch through
 * node-llama-cpp (node-evaluation.ts).
 * Its samplings start only once the batch's outputs are settled (sampling-order.ts):
 * node-llama-cpp's concurrent samplings can otherwise read another sequence's logits after a batch
 * whose outputs llama.cpp reordered (docs/findings.md).
 * This file is the scheduler: the queue, admission and the order of a step's parts; what a slot
 * and its request hold is slot.ts, what may be reused prompt-cache.ts, how a token is chosen and
 * released next-token.ts.
 */
export class BatchEngine {
  private readonly slots: Slot[];
  private readonly queue: Job[] = [];
  private wake: (() => void) | undefined;
  private draining = false;
  private stopped = false;
  private readonly loop: Promise<void>;
  private readonly shared: EngineShared;
  private admissions = 0;

  constructor(
    model: LlamaModel,
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
    const kind = native.reached ? stateKind(native.memoryKind) : undefined;
    const hostCache = kind !== undefined && cacheSettings.promptCache && cacheSettings.hostCacheMiB > 0 ? new HostPromptCache(cacheSettings.hostCacheMiB * 2 ** 20, kind) : undefined;
    this.shared = { model, native, observer, cacheSettings, stateKind: kind, prefillPlan: prefillPlan(cacheSettings, kind), hostCache, contextSize, fault, trace };
    this.slots = Array.from({ length: slotCount }, () => {
      const sequence = context.getSequence();
      return { sequence, sequenceId: sequenceIdOf(sequence), throughNode: false, cache: new SlotCache(), job: undefined };
    });
    this.loop = this.run();
  }

  get activeSlots(): number {
    return this.slots.filter((slot) => slot.job !== undefined).length;
  }

  /** The host cache's size and counts for /metrics (undefined: no host cache). */
  get hostCache(): HostCacheStats | undefined {
    return this.shared.hostCache?.stats;
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
      // FAULT sample-unseeded: the request's own seed is dropped.
      const seed = this.fault === "sample-unseeded" ? randomInt(2 ** 48 - 1) : request.seed ?? randomInt(2 ** 48 - 1);
      this.queue.push(newJob(request, seed, this.trace?.submitted(request.promptIds, request.traceRequest) ?? 0, resolve, reject));
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
      this.trace?.stepStarted(started);
      await this.step(await this.admit());
      // The clients reading what this step streamed share the cores with the next step, which
      // computes on all of them: a reader the writes woke would wait for a scheduler slice (3-4 ms
      // on 2 cores), and that wait is a first token's TTFT or delays a closed-loop client's next
      // request. Yielding the core once lets it run first; nothing waits when no one is ready.
      if (this.native.reached) this.native.yieldCpu();
      this.trace?.stepEnded();
      this.observer.step((performance.now() - started) / 1000, this.activeSlots, this.queue.length);
    }
  }

  /** This step's admissions from the queue, each to the idle slot prompt-cache.ts chooses, its sequence readied for the prompt. */
  private async admit(): Promise<Slot[]> {
    const admitted: Slot[] = [];
    let idle = this.idleSlots();
    const admissions = admissionsThisStep(idle.length, this.queue.length);
    for (; admitted.length < admissions; idle = this.idleSlots()) {
      const job = this.queue.shift()!;
      // A request that will not reuse a slot's state (cache bypassed, or decoded through node-llama-cpp) takes the least valuable slot.
      const reuses = this.decodesNatively(job.request) && cachesRequest(this.cacheSettings, job.request);
      const slot = chooseSlot(idle, job.request.promptIds, reuses ? this.shared.stateKind : undefined);
      slot.job = job;
      slot.cache.lastUsed = ++this.admissions;
      admitted.push(slot);
      this.trace?.admittedJob(job.traceId);
    }
    for (const slot of admitted) {
      const others = this.slots.filter((other) => other !== slot);
      await this.guard(slot, () => (this.decodesNatively(slot.job!.request) ? reuseSlot(this.shared, slot, others) : clearSlot(this.shared, slot)));
    }
    this.trace?.phaseEnded("admit");
    return admitted;
  }

  /** One step's compute: node-llama-cpp's batch, then speculation, then our own batch (never two decodes at once). */
  private async step(admitted: readonly Slot[]): Promise<void> {
    const { shared, trace } = this;
    // Generating requests go to llama.cpp in one batch of our own (stepBatch); those scoring
    // their prompt (and all without the addon) through node-llama-cpp, awaited together so they share one llama_decode (it batches
    // the calls of one tick). One after the other: never two decodes at once.
    const working = this.slots.filter((slot) => slot.job !== undefined);
    const batched = working.filter((slot) => this.decodesNatively(slot.job!.request));
    const throughNode = working.filter((slot) => !batched.includes(slot));
    // A slot past its prompt, not admitted this step: it decodes (or speculates) a token.
    const decodingToken = (slot: Slot) => !admitted.includes(slot) && slot.job!.prefill.length === 0;
    trace?.composition(admitted.length, working.filter(decodingToken).length);
    for (const slot of throughNode) slot.throughNode = true;
    for (const slot of admitted.filter((s) => throughNode.includes(s))) await this.guard(slot, async () => scorePromptNatively(shared, slot));
    await Promise.all(throughNode.map((slot) => this.guard(slot, () => (admitted.includes(slot) ? prefillThroughNode(shared, slot) : decodeThroughNode(shared, slot)))));
    trace?.phaseEnded("node");
    if (batched.length === 0) return;
    // With a draft model, decoding plain greedy slots speculate (slots still prefilling step first).
    const speculating = this.speculator === undefined ? [] : batched.filter((slot) => decodingToken(slot) && isPlainGreedy(slot.job!.request));
    if (speculating.length > 0) speculateSlots(shared, this.speculator!, speculating);
    trace?.phaseEnded("speculate");
    await stepBatch(shared, batched.filter((slot) => !speculating.includes(slot)), admitted);
    trace?.phaseEnded("settle");
    // After a step on this thread, let sockets flush and requests arrive before the next one.
    await new Promise<void>((resolve) => setImmediate(resolve));
    trace?.phaseEnded("turn");
  }

  private idleSlots(): Slot[] {
    return this.slots.filter((slot) => slot.job === undefined);
  }

  /**
   * Generating requests are decoded by stepBatch, the one path with a prompt cache; with a draft
   * model, greedy ones only if plain (a drafted token has no distribution to report), sampled ones
   * never speculated. The FAKE slot-clear
   * fault keeps node-llama-cpp's path, which goes on evaluating where an uncleared sequence ended.
   */
  private decodesNatively(request: GenerationRequest): boolean {
    return this.native.reached && this.fault !== "skip-slot-clear" && decodesInBatchStep(request) && (this.speculator === undefined || request.sampling.temperature > 0 || isPlainGreedy(request));
  }

  private dropCancelledFromQueue(): void {
    for (let i = this.queue.length - 1; i >= 0; i--) {
      const job = this.queue[i];
      if (job.request.signal.aborted) {
        this.queue.splice(i, 1);
        this.observer.finished("cancelled", undefined, 0);
        job.resolve(CANCELLED_IN_QUEUE);
      }
    }
  }

  /** A failing slot fails its own request only; the others keep going. */
  private async guard(slot: Slot, work: () => Promise<void>): Promise<void> {
    try {
      await work();
    } catch (error) {
      failSlot(this.shared, slot, error);
    }
  }
}
