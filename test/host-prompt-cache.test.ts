// test-tier: fast
/**
 * The host prompt cache's bookkeeping (server/host-prompt-cache.ts), without a model: which entry
 * a prompt continues from, what a store keeps or drops, and the byte budget.
 */
import { test } from "uvu";
import * as assert from "uvu/assert";
import { HostPromptCache } from "../server/host-prompt-cache.js";

const state = (bytes: number) => new Uint8Array(bytes);
const checkpoint = (tokens: number) => ({ tokens, data: state(10) });

test("a prompt continues from the entry it can reuse most of; none when nothing is reusable", () => {
  const cache = new HostPromptCache(10_000, "attention");
  cache.store([1, 2, 3, 4], state(100), []);
  cache.store([1, 2, 7, 7, 7], state(100), []);
  assert.is(cache.best([1, 2, 7, 7, 9])?.reusable, 4);
  assert.equal(cache.best([1, 2, 3, 4, 5])?.entry.tokens, [1, 2, 3, 4]);
  assert.is(cache.best([9, 9]), undefined);
});

test("recurrent state: an entry offers only what its checkpoints or its exact end reach", () => {
  const cache = new HostPromptCache(10_000, "recurrent");
  cache.store([1, 2, 3, 4, 5, 6], state(100), [checkpoint(3)]);
  assert.is(cache.best([1, 2, 3, 4, 5, 9])?.reusable, 3);
  assert.is(cache.best([1, 2, 3, 4, 5, 6, 7])?.reusable, 6);
  assert.is(cache.best([1, 2, 9]), undefined);
});

test("an entry a newer one extends goes; a state an entry already serves is not stored again", () => {
  const cache = new HostPromptCache(10_000, "attention");
  cache.store([1, 2, 3], state(100), []);
  cache.store([1, 2, 3, 4, 5], state(100), []);
  assert.is(cache.stats.entries, 1);
  cache.store([1, 2, 3], state(100), []);
  assert.equal(cache.stats, { bytes: 100, entries: 1, stores: 2, hits: 0, evictions: 0 });
});

test("recurrent state: a newer entry without a checkpoint where the older ended does not replace it", () => {
  const cache = new HostPromptCache(10_000, "recurrent");
  cache.store([1, 2, 3], state(100), []);
  cache.store([1, 2, 3, 4, 5], state(100), []);
  assert.is(cache.stats.entries, 2);
  cache.store([1, 2, 3, 4, 5, 6, 7], state(100), [checkpoint(5)]);
  assert.is(cache.stats.entries, 2, "the 5-token entry is served as far by the 7-token one's checkpoint");
});

test("within its byte budget: the least recently used entry goes first; a state larger than the budget is not stored", () => {
  const cache = new HostPromptCache(300, "attention");
  cache.store([1], state(100), []);
  cache.store([2], state(100), []);
  cache.store([3], state(100), []);
  cache.used(cache.best([1, 0])!.entry);
  cache.store([4], state(100), []);
  assert.is(cache.best([2, 0]), undefined, "the least recently used entry was evicted");
  assert.ok(cache.best([1, 0]) !== undefined, "the entry used since stays");
  assert.equal(cache.stats, { bytes: 300, entries: 3, stores: 4, hits: 1, evictions: 1 });
  cache.store([5], state(301), []);
  assert.is(cache.stats.entries, 3);
  // Checkpoints count toward an entry's size.
  cache.store([6], state(95), [checkpoint(1)]);
  assert.is(cache.stats.bytes, 305 - 100);
});

test.run();
