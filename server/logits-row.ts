import type { TokenId, TopK } from "../harness/sut/types.js";

/**
 * A next-token distribution as one number per vocabulary entry, indexed by token id: logits (the
 * addon's copy of a batch output, llamacpp-native-context.ts logitsRow) or log-probabilities
 * (rowFromProbabilities). Either is the log-softmax up to a constant the row shares, which is all
 * that ranking, sampling and the log-softmax itself need. Typed arrays, never a Map: a
 * vocabulary-sized Map and a sort of it cost a third of a second per token at 262k entries.
 */
export type LogitsRow = Float32Array | Float64Array;

/** node-llama-cpp's probabilities (the server's path without the addon) as a row of log-probabilities; ids it left out have probability 0. */
export function rowFromProbabilities(probabilities: ReadonlyMap<TokenId, number>): LogitsRow {
  let size = 0;
  for (const id of probabilities.keys()) size = Math.max(size, id + 1);
  const row = new Float64Array(size).fill(-Infinity);
  for (const [id, p] of probabilities) row[id] = Math.log(p);
  return row;
}

/** The first largest entry: llama.cpp's greedy sampler's pick (the addon's argmaxRow). */
export function rowArgmax(row: LogitsRow): TokenId {
  let best = 0;
  for (let id = 1; id < row.length; id++) {
    if (row[id] > row[best]) best = id;
  }
  return best;
}

/** log Σ exp(row): an entry minus it is that token's log-probability. */
export function rowLogSumExp(row: LogitsRow): number {
  const max = row[rowArgmax(row)];
  if (max === -Infinity) return -Infinity;
  let sum = 0;
  for (let id = 0; id < row.length; id++) sum += Math.exp(row[id] - max);
  return max + Math.log(sum);
}

/**
 * The `n` highest entries' ids, by falling value, lower id first on ties (the addon's topKRow
 * order). One pass keeps the best n so far in a heap whose root is the worst of them, so most
 * entries cost one comparison; only the n kept are sorted — sorting the whole row cost most of a
 * sampled token. NaN entries are never ranked.
 */
export function rankedIds(row: LogitsRow, n: number): Int32Array {
  const capacity = Math.min(Math.max(0, Math.floor(n)), row.length);
  const heap = new Int32Array(capacity);
  if (capacity === 0) return heap;
  // a ranks below b: a lower value, or an equal one at a higher id.
  const worse = (a: number, b: number) => row[a] < row[b] || (row[a] === row[b] && a > b);
  const siftDown = (size: number) => {
    for (let at = 0; ;) {
      const left = 2 * at + 1;
      if (left >= size) return;
      const child = left + 1 < size && worse(heap[left + 1], heap[left]) ? left + 1 : left;
      if (!worse(heap[child], heap[at])) return;
      [heap[at], heap[child]] = [heap[child], heap[at]];
      at = child;
    }
  };
  let size = 0;
  for (let id = 0; id < row.length; id++) {
    const value = row[id];
    if (value !== value) continue;
    if (size < capacity) {
      let at = size++;
      heap[at] = id;
      while (at > 0 && worse(heap[at], heap[(at - 1) >> 1])) {
        const parent = (at - 1) >> 1;
        [heap[at], heap[parent]] = [heap[parent], heap[at]];
        at = parent;
      }
    } else if (value > row[heap[0]]) {
      // An equal value at a later id ranks below the root: only a higher one replaces it.
      heap[0] = id;
      siftDown(size);
    }
  }
  return heap.subarray(0, size).sort((a, b) => row[b] - row[a] || a - b);
}

/** The k most likely tokens and their log-probabilities (log-softmax over the whole row). */
export function rowTopK(row: LogitsRow, k: number, logSumExp = rowLogSumExp(row)): TopK {
  const ids = [...rankedIds(row, k)];
  return { ids, logprobs: ids.map((id) => row[id] - logSumExp) };
}
