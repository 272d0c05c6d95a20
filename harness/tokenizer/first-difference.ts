/** Where two id sequences first part: the index, and the id each side has there (null past its end). */
export interface FirstDifference {
  readonly position: number;
  readonly expected: number | null;
  readonly observed: number | null;
}

/** The first position at which `observed` leaves `expected`; undefined when they are identical. */
export function firstDifference(expected: readonly number[], observed: readonly number[]): FirstDifference | undefined {
  const length = Math.max(expected.length, observed.length);
  for (let position = 0; position < length; position++) {
    if (expected[position] !== observed[position]) return { position, expected: expected[position] ?? null, observed: observed[position] ?? null };
  }
  return undefined;
}

/** Where two strings first part, in UTF-16 code units; undefined when equal. */
export function firstTextDifference(expected: string, observed: string): number | undefined {
  if (expected === observed) return undefined;
  let index = 0;
  while (index < expected.length && index < observed.length && expected[index] === observed[index]) index++;
  return index;
}
