import type { TokenId } from "../harness/sut/types.js";
import type { ServerFault } from "./faults.js";
import type { LlamaContextSequence, Token } from "node-llama-cpp";
import { sequenceIdOf } from "../harness/sut/llamacpp-native-context.js";
import { acceptToken } from "./next-token.js";
import { relabelRecurrentPosition, reusePrefix, SlotCache, type ReachedNative, type StateKind } from "./prompt-cache.js";
import { failSlot, liveSlots, type EngineShared, type Slot } from "./slot.js";

/** `bench serve --draft-model` / `--draft-max`, as /v1/models reports them. */
export interface SpeculationSettings {
  /** The draft model's file name (its path stays on the server). */
  readonly draft_model: string;
  /** Tokens the draft proposes per step, at most. */
  readonly draft_max: number;
}

/**
 * FAULT spec-accept-near-tie's band: a draft is kept where its target log-prob trails the argmax's
 * by at most this much, parity16's near-tie band (band_mnats 500): the band inside which the parity
 * suites forgive a different id, so a wrong token kept here is one a parity gate would forgive.
 */
const NEAR_TIE_BAND_NATS = 0.5;

/** A slot speculating this step: its target sequence, what that holds, and where the request stands. */
export interface SpeculatingSlot {
  readonly sequenceId: number;
  /** The target sequence's tokens (the prompt cache's view of it): kept true through rollbacks. */
  readonly cache: SlotCache;
  /** The prompt and every token generated so far; the last is not yet evaluated by the target. */
  readonly context: readonly TokenId[];
  /** Tokens this request may still take after the next one (its max_tokens, the slot's cells): drafts are capped by it. */
  readonly room: number;
}

/** One slot's step: the tokens it emits (accepted drafts, then the target's own token), and what it drafted and kept. */
export interface SpeculationOutcome {
  readonly tokens: readonly TokenId[];
  readonly drafted: number;
  readonly accepted: number;
}

/** The draft context's sequence for one target sequence, and what it holds. */
interface DraftSequence {
  /** Held while its id is used: node-llama-cpp clears a collected sequence's memory (sequenceIdOf). */
  readonly sequence: LlamaContextSequence;
  readonly sequenceId: number;
  readonly cache: SlotCache;
}

/**
 * Draft-model speculative decoding for greedy requests, as llama.cpp's draft-simple speculator does
 * (common/speculative.cpp): the draft proposes up to `draftMax` tokens greedily; the target
 * evaluates the slot's last token and every draft in one batch with an output at each position
 * (decodeVerify); the longest prefix of drafts equal to the target's argmax at their positions is
 * kept, and the target's own argmax after it is the step's last token. What was rejected leaves
 * both models' state: attention cells are removed; a recurrent target (GatedDeltaNet, Mamba) or
 * one with a sliding window (whose batch may have overwritten cells that left the window) is
 * restored from the checkpoint taken before the batch and the kept tokens evaluated again, and
 * such a draft is cut back through the prompt cache's checkpoints (reusePrefix). Greedy output
 * is then the plain decoder's, whatever the draft proposes, as far as llama.cpp computes a token
 * the same in a batch of several as alone: where it does not quite (gemma4-tiny, ~1e-3 nats), a
 * near tie can fall the other way (docs/speculative.md).
 */
export class DraftSpeculator {
  private readonly draftOf = new Map<number, DraftSequence>();
  /** The draft context's sequences not yet given to a target sequence, held as those in draftOf are. */
  private readonly freeDraftSequences: LlamaContextSequence[];

  constructor(
    private readonly target: ReachedNative,
    private readonly targetKind: StateKind,
    private readonly draft: ReachedNative,
    private readonly draftKind: StateKind,
    draftSequences: readonly LlamaContextSequence[],
    readonly settings: SpeculationSettings,
    /** A planted FAULT (tests only); see faults.ts. */
    private readonly fault: ServerFault | undefined,
  ) {
    this.freeDraftSequences = [...draftSequences];
  }

  /** One speculative step for each slot, verified in one target batch. Throws with the state of every slot unknown: the caller fails them. */
  step(slots: readonly SpeculatingSlot[]): SpeculationOutcome[] {
    for (const slot of slots) {
      if (slot.cache.tokens.length !== slot.context.length - 1) throw new Error(`speculation: the target sequence holds ${slot.cache.tokens.length} tokens, the request ${slot.context.length - 1}`);
    }
    let drafts: TokenId[][];
    try {
      drafts = this.propose(slots);
    } catch (error) {
      for (const slot of slots) this.forgetDraft(slot.sequenceId);
      throw error;
    }
    return this.verify(slots, drafts);
  }

  /** The draft's proposals: each slot's context caught up in one batch (its first draft), then one token per slot per batch. */
  private propose(slots: readonly SpeculatingSlot[]): TokenId[][] {
    const wanted = slots.map((slot) => Math.min(this.settings.draft_max, slot.room));
    const drafts: TokenId[][] = slots.map(() => []);
    const drafting = slots.map((slot, i) => ({ slot, i, sequence: this.draftSequence(slot.sequenceId) })).filter((d) => wanted[d.i] > 0);
    if (drafting.length === 0) return drafts;
    const catchUp = drafting.map(({ slot, sequence }) => {
      const reused = reusePrefix(this.draft, sequence, [], slot.context, this.draftKind, undefined);
      return { sequence, from: reused, tokens: slot.context.slice(reused) };
    });
    const first = this.draft.decodeGreedy(
      Int32Array.from(catchUp, (c) => c.sequence.sequenceId), Int32Array.from(catchUp, (c) => c.tokens.length),
      Int32Array.from(catchUp.flatMap((c) => c.tokens)), Int32Array.from(catchUp, (c) => c.from), 0,
    );
    drafting.forEach((d, j) => {
      d.sequence.cache.tokens = [...d.slot.context];
      // The state after the context, for cutting a recurrent or sliding-window draft back past rejected drafts next step.
      if (this.draftKind !== "attention") d.sequence.cache.keep({ tokens: d.slot.context.length, data: this.draft.saveCheckpoint(d.sequence.sequenceId) });
      drafts[d.i].push(first[j]);
    });
    for (let round = 1; ; round++) {
      const going = drafting.filter((d) => wanted[d.i] > round);
      if (going.length === 0) return drafts;
      const next = this.draft.decodeGreedy(
        Int32Array.from(going, (d) => d.sequence.sequenceId), Int32Array.from(going, () => 1),
        Int32Array.from(going, (d) => drafts[d.i][round - 1]), Int32Array.from(going, (d) => d.sequence.cache.tokens.length), 0,
      );
      going.forEach((d, j) => {
        d.sequence.cache.tokens.push(drafts[d.i][round - 1]);
        drafts[d.i].push(next[j]);
      });
    }
  }

  /** The target's verdict on every slot's drafts, in one batch, and each slot's state cut back to what it kept. */
  private verify(slots: readonly SpeculatingSlot[], drafts: readonly TokenId[][]): SpeculationOutcome[] {
    const checkpointed = this.targetKind !== "attention";
    const before = slots.map((slot, i) => (checkpointed && drafts[i].length > 0 ? this.target.saveCheckpoint(slot.sequenceId) : undefined));
    const batches = slots.map((slot, i) => [slot.context[slot.context.length - 1], ...drafts[i]]);
    const verdict = this.target.decodeVerify(
      Int32Array.from(slots, (slot) => slot.sequenceId), Int32Array.from(batches, (b) => b.length),
      Int32Array.from(batches.flat()), Int32Array.from(slots, (slot) => slot.cache.tokens.length),
    );
    let offset = 0;
    return slots.map((slot, i) => {
      const at = offset;
      offset += batches[i].length;
      const proposed = drafts[i];
      const kept = this.keptDrafts(proposed, (j) => verdict.argmax[at + j], (j) => verdict.trailNats[at + j]);
      const start = slot.cache.tokens.length;
      this.cutTarget(slot, start, batches[i], kept, before[i]);
      slot.cache.tokens.push(...batches[i].slice(0, kept + 1));
      return { tokens: [...proposed.slice(0, kept), verdict.argmax[at + kept]], drafted: proposed.length, accepted: kept };
    });
  }

  /** How many drafts the target keeps: while each is its argmax at its position (the planted faults keep more). */
  private keptDrafts(proposed: readonly TokenId[], argmax: (j: number) => number, trailNats: (j: number) => number): number {
    let kept = 0;
    // FAULT spec-accept-near-tie: a draft inside the near-tie band counts as the argmax.
    const agrees = (j: number) => argmax(j) === proposed[j] || (this.fault === "spec-accept-near-tie" && trailNats(j) <= NEAR_TIE_BAND_NATS);
    while (kept < proposed.length && agrees(kept)) kept++;
    // FAULT spec-accept-past-mismatch: the first rejected draft is kept too.
    if (this.fault === "spec-accept-past-mismatch" && kept < proposed.length) kept++;
    return kept;
  }

  /**
   * The target sequence evaluated `batch` (the slot's last token and its drafts) from `start` and
   * keeps its first kept + 1 tokens. Attention: the rest's cells go. Recurrent or sliding window: the
   * state from before the batch comes back and the kept tokens are evaluated again (a recurrent
   * state cannot be cut; a window's batch may have taken cells that left it, which the kept
   * tokens' positions still see).
   */
  private cutTarget(slot: SpeculatingSlot, start: number, batch: readonly TokenId[], kept: number, before: Uint8Array | undefined): void {
    const keep = start + kept + 1;
    if (keep === start + batch.length) return;
    const id = slot.sequenceId;
    if (this.targetKind === "attention") {
      if (!this.target.removeFrom(id, keep)) throw new Error(`speculation: llama.cpp would not remove sequence ${id}'s cells from position ${keep}`);
      return;
    }
    if (this.fault === "spec-no-rollback" && this.targetKind === "recurrent") {
      // FAULT: the recurrent state keeps the rejected drafts; only its position is set back to the kept tokens'.
      const after = relabelRecurrentPosition(this.target.saveCheckpoint(id), start + batch.length - 1, keep - 1, "FAULT spec-no-rollback");
      if (!this.target.restoreCheckpoint(id, after) || !this.target.removeFrom(id, keep)) throw new Error(`FAULT spec-no-rollback: sequence ${id} could not be set back to position ${keep}`);
      return;
    }
    if (before === undefined || !this.target.restoreCheckpoint(id, before) || !this.target.removeFrom(id, start)) {
      throw new Error(`speculation: sequence ${id}'s state from before position ${start} could not be restored`);
    }
    this.target.decodeGreedy(Int32Array.of(id), Int32Array.of(kept + 1), Int32Array.from(batch.slice(0, kept + 1)), Int32Array.of(start), 0);
  }

  private draftSequence(targetSequence: number): DraftSequence {
    let sequence = this.draftOf.get(targetSequence);
    if (sequence === undefined) {
      const free = this.freeDraftSequences.shift();
      if (free === undefined) throw new Error("speculation: the draft context has fewer sequences than the target has slots");
      sequence = { sequence: free, sequenceId: sequenceIdOf(free), cache: new SlotCache() };
      this.draftOf.set(targetSequence, sequence);
    }
    return sequence;
  }

  /** A failed draft step leaves the draft sequence unknown: it starts cold next time. */
  private forgetDraft(targetSequence: number): void {
    const sequence = this.draftOf.get(targetSequence);
    if (sequence === undefined) return;
    sequence.cache.forget();
    this.draft.clearSequence(sequence.sequenceId);
  }
}

/**
 * The engine's speculative step for its decoding greedy slots: each emits the drafts its target
 * kept and the target's own next token, through acceptToken as any token (a stop or max_tokens
 * ends it mid-way). A failure fails these requests only.
 */
export function speculateSlots(shared: EngineShared, speculator: DraftSpeculator, slots: readonly Slot[]): void {
  const live = liveSlots(shared, slots);
  if (live.length === 0) return;
  let outcomes: SpeculationOutcome[];
  try {
    outcomes = speculator.step(live.map((slot) => {
      const { request, ids } = slot.job!;
      const context = [...request.promptIds, ...ids];
      // Every emitted token must fit max_tokens, and every drafted position a cell of the slot.
      return { sequenceId: slot.sequenceId, cache: slot.cache, context, room: Math.min(request.maxTokens - ids.length - 1, shared.contextSize - context.length) };
    }));
  } catch (error) {
    for (const slot of live) failSlot(shared, slot, error);
    return;
  }
  live.forEach((slot, i) => {
    const job = slot.job!;
    const { tokens, drafted, accepted } = outcomes[i];
    job.drafted += drafted;
    job.accepted += accepted;
    shared.observer.speculated(drafted, accepted);
    try {
      for (const [t, token] of tokens.entries()) {
        if (slot.job !== job) break;
        if (t < accepted) job.acceptedDraftPositions.push(job.ids.length);
        acceptToken(shared, slot, { next: { token: token as Token } });
      }
    } catch (error) {
      failSlot(shared, slot, error);
    }
  });
}
