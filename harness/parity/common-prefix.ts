import type { TokenId } from "../sut/types.js";

/** Length of the longest common prefix of two id sequences: where a cache's reuse ends, or where two answers part. */
export function commonPrefixLength(a: readonly TokenId[], b: readonly TokenId[]): number {
  const limit = Math.min(a.length, b.length);
  let n = 0;
  while (n < limit && a[n] === b[n]) n++;
  return n;
}
