import type { TokenId } from "../harness/sut/types.js";
import type { ServerFault } from "./faults.js";
import { reusableTokens, type CachedSequence, type Checkpoint, type ReachedNative, type StateKind } from "./prompt-cache.js";

/** A slot's whole state kept in host memory: its tokens, llama.cpp's sequence state and the checkpoints that let it be cut back. */
export interface HostEntry {
  readonly tokens: readonly TokenId[];
  readonly state: Uint8Array;
  readonly checkpoints: readonly Checkpoint[];
  readonly bytes: number;
  lastUsed: number;
}

/** What /metrics reports of the host cache. */
export interface HostCacheStats {
  readonly bytes: number;
  readonly entries: number;
  readonly stores: number;
  readonly hits: number;
  readonly evictions: number;
}

/**
 * The prompt cache beyond the slots (llama-server's `--cache-ram`): conversations that lose their
 * slot to another keep their state here, within a byte budget, and a later prompt that continues
 * one restores it into whichever slot it gets. Least recently used entries go first: a workload of
 * more conversations than slots revisits the recent ones, and an entry another one extends goes at
 * once (the newer serves every prompt the older could).
 */
export class HostPromptCache {
  private entries: HostEntry[] = [];
  private clock = 0;
  private stores = 0;
  private hits = 0;
  private evictions = 0;

  constructor(readonly capacityBytes: number, private readonly kind: StateKind) {}

  get stats(): HostCacheStats {
    return { bytes: this.bytes, entries: this.entries.length, stores: this.stores, hits: this.hits, evictions: this.evictions };
  }

  private get bytes(): number {
    return this.entries.reduce((sum, entry) => sum + entry.bytes, 0);
  }

  /** Keeps a state (nothing where it alone exceeds the budget, or an entry already serves as well); older entries go to make room. */
  store(tokens: readonly TokenId[], state: Uint8Array, checkpoints: readonly Checkpoint[]): void {
    const bytes = state.byteLength + checkpoints.reduce((sum, c) => sum + c.data.byteLength, 0);
    if (tokens.length === 0 || bytes > this.capacityBytes) return;
    const entry: HostEntry = { tokens: [...tokens], state, checkpoints: [...checkpoints], bytes, lastUsed: ++this.clock };
    // Already held: an entry that serves every continuation of this state as far (llama-server skips such a store too).
    const holder = this.entries.find((held) => this.servesAsWell(held, entry));
    if (holder !== undefined) {
      holder.lastUsed = entry.lastUsed;
      return;
    }
    this.entries = this.entries.filter((older) => !this.servesAsWell(entry, older));
    while (this.entries.length > 0 && this.bytes + bytes > this.capacityBytes) {
      const oldest = this.entries.reduce((a, b) => (b.lastUsed < a.lastUsed ? b : a));
      this.entries = this.entries.filter((e) => e !== oldest);
      this.evictions++;
    }
    this.entries.push(entry);
    this.stores++;
  }

  /** The entry the prompt can continue furthest from, and how far (undefined: none offers a token). */
  best(prompt: readonly TokenId[]): { readonly entry: HostEntry; readonly reusable: number } | undefined {
    let found: { entry: HostEntry; reusable: number } | undefined;
    for (const entry of this.entries) {
      const reusable = reusableTokens(entry, prompt, this.kind);
      if (reusable > (found?.reusable ?? 0)) found = { entry, reusable };
    }
    return found;
  }

  /** An entry was restored into a slot: it stays (the slot may lose it again unchanged) as the most recently used. */
  used(entry: HostEntry): void {
    entry.lastUsed = ++this.clock;
    this.hits++;
  }

  /** FAULT host-restore-other: the state of another entry as long as `entry` (llama.cpp then decodes on without a complaint), its own where there is none. */
  otherState(entry: HostEntry): Uint8Array {
    return this.entries.find((e) => e !== entry && e.tokens.length === entry.tokens.length)?.state ?? entry.state;
  }

  /** Every continuation of the older entry's tokens can reuse as many from the newer one. */
  private servesAsWell(newer: HostEntry, older: HostEntry): boolean {
    // A token id no vocabulary has: any continuation of the older entry, as far as the newer can tell.
    const continuation = [...older.tokens, -1];
    return reusableTokens(newer, continuation, this.kind) >= reusableTokens(older, continuation, this.kind);
  }
}

/**
 * Before a prompt is admitted to a slot: where the host holds a state the prompt can continue
 * further than from the slot's own, that state replaces the slot's; and where the slot's state
 * is about to be lost (replaced, or cut back to under half of it, llama-server's rule) it is kept
 * in the host first. A request that may not reuse anything (`prompt` undefined) only keeps the
 * slot's state before it is cleared.
 */
export function exchangeWithHost(native: ReachedNative, slot: CachedSequence, prompt: readonly TokenId[] | undefined, kind: StateKind, host: HostPromptCache, fault: ServerFault | undefined): void {
  const { cache } = slot;
  const kept = prompt === undefined ? 0 : reusableTokens(cache, prompt, kind);
  const found = prompt === undefined ? undefined : host.best(prompt);
  const restoring = found !== undefined && found.reusable > kept ? found.entry : undefined;
  if (cache.tokens.length > 0 && (restoring !== undefined || kept < cache.tokens.length / 2)) {
    host.store(cache.tokens, native.saveSequence(slot.sequenceId), cache.checkpoints);
  }
  if (restoring === undefined) return;
  const state = fault === "host-restore-other" ? host.otherState(restoring) : restoring.state;
  if (native.restoreSequence(slot.sequenceId, state)) {
    cache.tokens = [...restoring.tokens];
    cache.checkpoints = [...restoring.checkpoints];
    host.used(restoring);
  } else {
    // llama.cpp refused the state (no room for its cells): the slot starts cold, which is correct.
    native.clearSequence(slot.sequenceId);
    cache.forget();
  }
}
