import { commonPrefixLength } from "../harness/parity/common-prefix.js";
import type { TokenId } from "../harness/sut/types.js";
import type { MemoryKind, NativeContext } from "../harness/sut/llamacpp-native-context.js";
import type { ServerFault } from "./faults.js";

/** The prompt cache's settings, as `bench serve` takes them and /v1/models reports them. */
export interface PromptCacheSettings {
  /** Whether a slot keeps its state between requests and the next prompt starts where they agree. */
  readonly promptCache: boolean;
  /** Tokens of a prompt per llama_decode (the batch size caps it). */
  readonly prefillChunk: number;
  /** Host memory for slots' states beyond the slots (`--cache-ram`, MiB; 0: none). */
  readonly hostCacheMiB: number;
}

/** The state a slot's sequence held after `tokens` tokens, for the part llama.cpp cannot truncate. */
export interface Checkpoint {
  readonly tokens: number;
  readonly data: Uint8Array;
}

/**
 * How a model's state can be cut back to a shorter prefix: attention KV by removing cells;
 * recurrent state (alone or beside attention) never, only restored from a checkpoint; a sliding
 * window only from a checkpoint too. llama.cpp reuses any cell that left a sequence's window for
 * new tokens, not only the oldest, so a window cut back to an earlier position can have holes
 * that llama_memory_seq_pos_min does not show (measured: docs/server-cache.md).
 */
export type StateKind = "attention" | "sliding-window" | "recurrent";

export function stateKind(kind: MemoryKind): StateKind {
  if (kind.recurrent || kind.hybrid) return "recurrent";
  return kind.slidingWindow > 0 ? "sliding-window" : "attention";
}

/** Checkpoints kept per slot (llama-server keeps a bounded list too): the oldest goes first. */
const MAX_CHECKPOINTS = 16;

/** What a slot's sequence holds in llama.cpp's memory, so that the next prompt can start where they agree. */
export class SlotCache {
  /** The tokens whose state the sequence holds, positions 0.. in order. */
  tokens: TokenId[] = [];
  checkpoints: Checkpoint[] = [];
  /** When the slot last took a request (admission count): ties in slot choice go to the least recent. */
  lastUsed = 0;

  /** The sequence's memory is unknown or gone: nothing in it may be reused. */
  forget(): void {
    this.tokens = [];
    this.checkpoints = [];
  }

  keep(checkpoint: Checkpoint): void {
    this.checkpoints = this.checkpoints.filter((c) => c.tokens !== checkpoint.tokens);
    this.checkpoints.push(checkpoint);
    if (this.checkpoints.length > MAX_CHECKPOINTS) this.checkpoints.shift();
  }
}


/**
 * A shared prefix shorter than this part of the prompt does not steer slot choice (llama-server's
 * default slot_prompt_similarity): a lone BOS in common would otherwise send every request to the
 * slot of the last one and evict a cache that a later request could hit.
 */
const MIN_MATCH_FRACTION = 0.1;

/**
 * How many of the prompt's first tokens a cache holding `held` can really continue from: the
 * shared prefix where attention cells can be cut back (or the prompt extends exactly what is held),
 * else only up to the latest checkpoint within it. At least the prompt's last token is left to
 * evaluate (its logits give the first token). What cutBack reaches, without its planted faults.
 */
export function reusableTokens(held: { readonly tokens: readonly TokenId[]; readonly checkpoints: readonly Checkpoint[] }, prompt: readonly TokenId[], kind: StateKind): number {
  const wanted = Math.min(commonPrefixLength(held.tokens, prompt), prompt.length - 1);
  if (wanted <= 0) return 0;
  if (wanted === held.tokens.length || kind === "attention") return wanted;
  return latestCheckpoint(held.checkpoints, wanted)?.tokens ?? 0;
}

/** The checkpoint holding the most tokens, at most `wanted`. */
function latestCheckpoint(checkpoints: readonly Checkpoint[], wanted: number): Checkpoint | undefined {
  return checkpoints.filter((c) => c.tokens > 0 && c.tokens <= wanted).reduce<Checkpoint | undefined>((best, c) => (best === undefined || c.tokens > best.tokens ? c : best), undefined);
}

/**
 * Slot choice by what can really be reused: the idle slot from which the prompt can continue
 * furthest (reusableTokens: a hybrid's slot sharing a long prefix but no checkpoint inside it
 * offers nothing). A request that can reuse nothing (or may not: `kind` undefined) takes the least
 * valuable slot, an empty one before one holding a conversation, then the least recently used:
 * it never takes a slot whose conversation another slot could have spared.
 */
export function chooseSlot<S extends { readonly cache: SlotCache }>(idle: readonly S[], prompt: readonly TokenId[], kind: StateKind | undefined): S {
  let best = idle[0];
  let bestMatch = -1;
  for (const slot of idle) {
    const reusable = kind === undefined ? 0 : reusableTokens(slot.cache, prompt, kind);
    const match = reusable >= MIN_MATCH_FRACTION * prompt.length ? reusable : 0;
    if (match > bestMatch || (match === bestMatch && lessValuable(slot.cache, best.cache))) {
      best = slot;
      bestMatch = match;
    }
  }
  return best;
}

/** An empty slot is worth less than one holding tokens; among either, the least recently used. */
function lessValuable(a: SlotCache, b: SlotCache): boolean {
  const aEmpty = a.tokens.length === 0;
  if (aEmpty !== (b.tokens.length === 0)) return aEmpty;
  return a.lastUsed < b.lastUsed;
}

/** Where a prefill of positions [from, to) stops between llama_decodes, and which stops keep a checkpoint. */
export interface PrefillStop {
  readonly end: number;
  /** The checkpoint taken here is filed as holding this many tokens (undefined: none taken). */
  readonly checkpointAs: number | undefined;
  /** A prefill chunk ends here (not the prompt's own end). */
  readonly chunkEdge: boolean;
}

/** How a prompt's prefill is cut into llama_decodes: one plan for a server, whether a request uses the cache or not. */
export interface PrefillPlan {
  readonly chunk: number;
  /** A stop one token before the prompt's end, where the state cannot be truncated (so that a repeat of the prompt can restore it). */
  readonly stopBeforeLast: boolean;
  /** Checkpoints are kept at the stops (only where the cache will use them). */
  readonly checkpointed: boolean;
}

/**
 * The plan for a server's settings and model. The stop before the last token is made with the
 * cache off too: llama.cpp's results depend on how a prompt is cut into batches (measured on
 * gemma4: log-probs 1e-3 apart and another token at position 107 of a 300-token reply), so the
 * cache on, off or bypassed per request must cut a prompt the same way to answer the same.
 */
export function prefillPlan(settings: PromptCacheSettings, kind: StateKind | undefined): PrefillPlan {
  const truncatable = kind === undefined || kind === "attention";
  return { chunk: settings.prefillChunk, stopBeforeLast: !truncatable, checkpointed: settings.promptCache && !truncatable };
}

/**
 * A prefill split at every chunk edge (counted from where it starts, as llama-server chunks what
 * it has to process) and, where the plan says, also one token before the end: checkpoints at
 * every stop then let a later prompt that shares a prefix (or repeats this one) restore instead of
 * re-prefilling. FAULT restore-one-early takes each checkpoint one token before the stop it is
 * filed under.
 */
export function prefillStops(from: number, to: number, plan: PrefillPlan, fault: ServerFault | undefined): PrefillStop[] {
  const chunkEdges = new Set<number>();
  for (let end = from + plan.chunk; end < to; end += plan.chunk) chunkEdges.add(end);
  const beforeLast = plan.stopBeforeLast && to - 1 > from ? [to - 1] : [];
  const filed = plan.checkpointed ? [...chunkEdges, ...beforeLast, to] : [];
  const early = fault === "restore-one-early";
  const taken = new Map(filed.map((end) => [early ? end - 1 : end, end]));
  const ends = [...new Set([...chunkEdges, ...beforeLast, to, ...[...taken.keys()].filter((end) => end > from)])].sort((a, b) => a - b);
  return ends.map((end) => ({ end, checkpointAs: taken.get(end), chunkEdge: chunkEdges.has(end) }));
}

/**
 * FAULT restore-one-early: a recurrent checkpoint taken one token early gets the position of the
 * stop it is filed under, so llama.cpp resumes from it there (the state lacks one token). The
 * recurrent part of a sequence's state holds its one cell as a count (u32 1) and the cell's last
 * position (i32), after a short header (src/llama-memory-recurrent.cpp, state_write): the first
 * such pair near the start, with the position the early state has, is relabelled.
 */
export function misfiledCheckpoint(data: Uint8Array, filedAs: number): Uint8Array {
  return relabelRecurrentPosition(data, filedAs - 2, filedAs - 1, "FAULT restore-one-early");
}

/**
 * A recurrent checkpoint whose one cell's last position `from` reads `to` (the layout
 * misfiledCheckpoint describes): llama.cpp then resumes from that state at the new position. Only
 * planted faults misfile states; `fault` names the one that asked, in the error.
 */
export function relabelRecurrentPosition(data: Uint8Array, from: number, to: number, fault: string): Uint8Array {
  const copy = data.slice();
  const view = new DataView(copy.buffer);
  for (let offset = 0; offset + 8 <= Math.min(copy.byteLength, 64); offset += 4) {
    if (view.getUint32(offset, true) === 1 && view.getInt32(offset + 4, true) === from) {
      view.setInt32(offset + 4, to, true);
      return copy;
    }
  }
  throw new Error(`${fault}: the recurrent state's layout is not the one this fault knows`);
}

export type ReachedNative = Extract<NativeContext, { reached: true }>;

/** A slot as the prompt cache sees it: its llama.cpp sequence and what it holds. */
export interface CachedSequence {
  readonly sequenceId: number;
  readonly cache: SlotCache;
}

/**
 * Cuts a slot's sequence back to the longest prefix it shares with the prompt that it can really
 * continue from, and returns that prefix's length: the prompt's first n tokens need no prefill. At
 * least the prompt's last token is always left to evaluate (its logits give the first token).
 * Where nothing valid is left (no common prefix, or recurrent / sliding-window state with no
 * checkpoint at or before the split) the sequence is cleared and 0 returned: a full prefill, correct.
 */
export function reusePrefix(native: ReachedNative, slot: CachedSequence, others: readonly CachedSequence[], prompt: readonly TokenId[], kind: StateKind, fault: ServerFault | undefined): number {
  const { cache } = slot;
  const wanted = Math.min(commonPrefixLength(cache.tokens, prompt), prompt.length - 1);
  const reused = wanted > 0 ? cutBack(native, slot, others, wanted, kind, fault) : 0;
  if (reused === 0) {
    native.clearSequence(slot.sequenceId);
    cache.forget();
    return 0;
  }
  cache.tokens = prompt.slice(0, reused);
  cache.checkpoints = cache.checkpoints.filter((c) => c.tokens <= reused);
  return reused;
}

/** The prefix length the sequence now continues from (0: nothing usable). */
function cutBack(native: ReachedNative, slot: CachedSequence, others: readonly CachedSequence[], wanted: number, kind: StateKind, fault: ServerFault | undefined): number {
  const { sequenceId, cache } = slot;
  if (fault === "restore-other-slot" && kind === "attention") {
    // FAULT: the hit's cells are taken from another slot's sequence, which holds another prompt.
    const other = others.find((o) => o.cache.tokens.length >= wanted);
    if (other !== undefined) {
      // llama.cpp copies between per-sequence streams only whole.
      native.clearSequence(sequenceId);
      native.copySequence(other.sequenceId, sequenceId, -1, -1);
      return native.removeFrom(sequenceId, wanted) ? wanted : 0;
    }
  }
  // The sequence ends exactly where the prompt goes on (a multi-turn extension): nothing to undo.
  if (wanted === cache.tokens.length) return wanted;
  if (kind === "attention") return native.removeFrom(sequenceId, wanted) ? wanted : 0;
  if (kind === "sliding-window" && fault === "swa-past-window" && native.removeFrom(sequenceId, wanted)) {
    // FAULT: the window is trusted when its first position is early enough, as if it had no holes.
    if (windowStartsInTime(native.firstPosition(sequenceId), wanted, native.memoryKind.slidingWindow)) return wanted;
  }
  let checkpoint = latestCheckpoint(cache.checkpoints, wanted);
  if (checkpoint === undefined) return 0;
  if (fault === "restore-other-slot") {
    // FAULT: the checkpoint restored is another slot's, filed under the same length.
    checkpoint = others.map((o) => o.cache.checkpoints.find((c) => c.tokens === checkpoint!.tokens)).find((c) => c !== undefined) ?? checkpoint;
  }
  // Restoring replaces the recurrent / window state; the attention cells past it are then removed.
  return native.restoreCheckpoint(sequenceId, checkpoint.data) && native.removeFrom(sequenceId, checkpoint.tokens) ? checkpoint.tokens : 0;
}

/**
 * FAULT swa-past-window's test: the first position a sliding-window cache cut back to n tokens
 * holds is no later than the window of the token at n needs (positions after n - window). It
 * says nothing of holes after it.
 */
function windowStartsInTime(firstPosition: number, n: number, window: number): boolean {
  return firstPosition >= 0 && firstPosition <= Math.max(0, n - window);
}

/** Whether a request may reuse what a slot holds: the server's prompt cache is on and the request did not ask for a cold prompt (`cache_prompt: false`). */
export function cachesRequest(settings: PromptCacheSettings, request: { readonly cachePrompt?: boolean }): boolean {
  return settings.promptCache && request.cachePrompt !== false;
}

/**
 * An admitted prompt's start in its slot: the sequence cut back to what it may reuse (reusePrefix),
 * or cleared when the request may not reuse anything. Returns the cached tokens to report.
 */
export function admitToCache(
  native: ReachedNative, slot: CachedSequence, others: readonly CachedSequence[], request: { readonly promptIds: readonly TokenId[]; readonly cachePrompt?: boolean },
  settings: PromptCacheSettings, kind: StateKind, fault: ServerFault | undefined,
): number {
  let reused = 0;
  if (cachesRequest(settings, request)) {
    reused = reusePrefix(native, slot, others, request.promptIds, kind, fault);
  } else {
    slot.cache.forget();
    native.clearSequence(slot.sequenceId);
  }
  if (fault === "report-hits-no-reuse") {
    // FAULT: the hit is reported, and everything is prefilled again anyway.
    slot.cache.forget();
    native.clearSequence(slot.sequenceId);
  }
  return fault === "reuse-not-reported" ? 0 : reused;
}

/** After a prefill stop's decode: the slot's state kept as a checkpoint where the stop takes one (prefillStops). */
export function keepCheckpointAt(native: ReachedNative, slot: CachedSequence, stop: PrefillStop, kind: StateKind | undefined): void {
  if (stop.checkpointAs === undefined) return;
  const data = native.saveCheckpoint(slot.sequenceId);
  const misfiled = stop.checkpointAs !== stop.end && kind === "recurrent";
  slot.cache.keep({ tokens: stop.checkpointAs, data: misfiled ? misfiledCheckpoint(data, stop.checkpointAs) : data });
}
