import fc from "fast-check";
import * as assert from "uvu/assert";
import { BenchError } from "../../harness/errors.js";

/**
 * Property runs for the parser fuzz tests. `npm test` runs each property its base number of times;
 * `npm run fuzz` multiplies them (FUZZ_SCALE) for depth. The seed is printed first, so any failure
 * reproduces with FUZZ_SEED=<seed> (fast-check also prints the shrunk counterexample and its path).
 */
const scale = Number(process.env.FUZZ_SCALE ?? "1");
export const FUZZ_SEED = process.env.FUZZ_SEED === undefined ? Date.now() % 2 ** 31 : Number(process.env.FUZZ_SEED);
if (!Number.isInteger(FUZZ_SEED) || !(scale > 0)) throw new Error("FUZZ_SEED must be an integer and FUZZ_SCALE a positive number");

/** Inputs tried per parser, for the figures the run prints at the end. */
const inputsTried = new Map<string, number>();

function runsFor(parser: string, baseRuns: number): number {
  const runs = Math.max(1, Math.round(baseRuns * scale));
  inputsTried.set(parser, (inputsTried.get(parser) ?? 0) + runs);
  return runs;
}

export function fuzz<Ts extends [unknown, ...unknown[]]>(parser: string, baseRuns: number, arbitraries: { [K in keyof Ts]: fc.Arbitrary<Ts[K]> }, predicate: (...args: Ts) => void): void {
  fc.assert(fc.property(...arbitraries, predicate), { numRuns: runsFor(parser, baseRuns), seed: FUZZ_SEED, includeErrorInReport: true });
}

export async function fuzzAsync<Ts extends [unknown, ...unknown[]]>(parser: string, baseRuns: number, arbitraries: { [K in keyof Ts]: fc.Arbitrary<Ts[K]> }, predicate: (...args: Ts) => Promise<void>): Promise<void> {
  await fc.assert(fc.asyncProperty(...arbitraries, predicate), { numRuns: runsFor(parser, baseRuns), seed: FUZZ_SEED, includeErrorInReport: true });
}

/**
 * The contract for anything read from someone else: a value, or a BenchError whose one line says
 * what is wrong (one line: a newline would let a file forge the next line of our output).
 * Anything else (TypeError, RangeError, a plain Error) fails the property.
 */
export function valueOrBenchError<T>(read: () => T): T | BenchError {
  try {
    return read();
  } catch (error) {
    if (!(error instanceof BenchError)) throw error;
    assert.not.match(error.oneLine(), /[\n\r]/, "a BenchError is one line");
    return error;
  }
}

export function printFuzzFigures(): void {
  console.log(`\nfuzz seed ${FUZZ_SEED} (reproduce: FUZZ_SEED=${FUZZ_SEED}${scale === 1 ? "" : ` FUZZ_SCALE=${scale}`})`);
  for (const [parser, runs] of inputsTried) console.log(`fuzz: ${parser}: ${runs} inputs`);
}

/**
 * A byte-level mutation of a valid file, kept as a small description (so a failure prints the edit,
 * not the whole file): a cut, overwritten bytes, an extreme 64-bit count, inserted bytes.
 */
export type Mutation =
  | { readonly cut: number }
  | { readonly overwrite: number; readonly bytes: readonly number[] }
  | { readonly u64: number; readonly value: bigint }
  | { readonly insert: number; readonly bytes: readonly number[] };

export function mutation(validLength: number): fc.Arbitrary<Mutation> {
  const at = fc.nat({ max: Math.max(0, validLength - 1) });
  const bytes = (max: number) => fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 1, maxLength: max });
  const extremes = [0n, 1n, 2n ** 31n, 2n ** 32n - 1n, 2n ** 53n + 1n, 2n ** 63n, 2n ** 64n - 1n];
  return fc.oneof(
    at.map((cut) => ({ cut })),
    fc.record({ overwrite: at, bytes: bytes(8) }),
    fc.record({ u64: at, value: fc.constantFrom(...extremes) }),
    fc.record({ insert: at, bytes: bytes(16) }),
  );
}

export function applyMutation(valid: Uint8Array, edit: Mutation): Uint8Array {
  if ("cut" in edit) return valid.slice(0, edit.cut);
  if ("overwrite" in edit) {
    const copy = valid.slice();
    copy.set(edit.bytes.slice(0, copy.length - edit.overwrite), edit.overwrite);
    return copy;
  }
  if ("u64" in edit) {
    const copy = new Uint8Array(Math.max(valid.length, edit.u64 + 8));
    copy.set(valid);
    new DataView(copy.buffer).setBigUint64(edit.u64, edit.value, true);
    return copy;
  }
  return new Uint8Array([...valid.subarray(0, edit.insert), ...edit.bytes, ...valid.subarray(edit.insert)]);
}

/** A JSON document derived from a valid one: a value replaced, a key dropped or added, anywhere in the tree. */
export function mutatedJson(valid: unknown): fc.Arbitrary<unknown> {
  const paths: (string | number)[][] = [];
  const walk = (node: unknown, path: (string | number)[]) => {
    paths.push(path);
    if (Array.isArray(node)) node.forEach((child, i) => walk(child, [...path, i]));
    else if (typeof node === "object" && node !== null) for (const [key, child] of Object.entries(node)) walk(child, [...path, key]);
  };
  walk(valid, []);
  const anyJson = fc.jsonValue({ maxDepth: 2 });
  const edit = fc.tuple(fc.constantFrom(...paths), fc.constantFrom("replace", "delete", "add"), anyJson, fc.string({ maxLength: 12 }));
  return fc.array(edit, { minLength: 1, maxLength: 3 }).map((edits) => {
    let document: unknown = structuredClone(valid);
    for (const [path, kind, value, key] of edits) document = applyEdit(document, path, kind, value, key);
    return document;
  });
}

function applyEdit(document: unknown, path: readonly (string | number)[], kind: string, value: unknown, key: string): unknown {
  if (path.length === 0) return kind === "replace" ? value : document;
  let parent = document as Record<string | number, unknown>;
  for (const step of path.slice(0, -1)) {
    const next = parent?.[step];
    if (typeof next !== "object" || next === null) return document;
    parent = next as Record<string | number, unknown>;
  }
  const last = path[path.length - 1];
  if (typeof parent !== "object" || parent === null) return document;
  if (kind === "replace") parent[last] = value;
  else if (kind === "delete") {
    if (Array.isArray(parent)) parent.splice(Number(last), 1);
    else delete parent[last];
  } else {
    const target = parent[last];
    if (Array.isArray(target)) target.push(value);
    else if (typeof target === "object" && target !== null) (target as Record<string, unknown>)[key] = value;
  }
  return document;
}
