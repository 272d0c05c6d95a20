import { createHash } from "node:crypto";
import { SeededRandom } from "../fixtures/seeded-random.js";

/** The seed of one case, derived from (trial, depth, L) so a printed seed reproduces the case. */
export function needleSeed(trial: number, depth: number, length: number): number {
  return createHash("sha256").update(`niah:${trial}:${depth}:${length}`).digest().readUInt32LE(0);
}

export function needleFromSeed(seed: number, alphabet: string, length: number): string {
  const random = new SeededRandom(seed);
  let needle = "";
  for (let i = 0; i < length; i++) needle += alphabet[Math.floor(random.uniform() * alphabet.length)];
  return needle;
}
