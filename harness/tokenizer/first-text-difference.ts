/**
 * Where a round trip's text first leaves the text that went in, in UTF-16 code units; undefined
 * when equal (ids are compared with firstDivergence, harness/speculative/compare.ts).
 */
export function firstTextDifference(expected: string, observed: string): number | undefined {
  if (expected === observed) return undefined;
  let index = 0;
  while (index < expected.length && index < observed.length && expected[index] === observed[index]) index++;
  return index;
}
