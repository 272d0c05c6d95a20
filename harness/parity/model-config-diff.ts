import { readGguf } from "../gguf/read.js";
import type { GgufValue } from "../gguf/types.js";

function show(value: GgufValue["value"]): string {
  return Array.isArray(value) ? `[${value.join(",")}]` : String(value);
}

/**
 * The hyper-parameters in which a SUT's model file differs from the oracle's: every metadata key
 * except `general.*` (name, encoding) and `tokenizer.*` (the tokenizer has its own check). A
 * quantized twin of the oracle differs in none; a model run with another sliding window, rope base
 * or expert count is named here, so a parity failure points at the configuration, not at kernels.
 */
export function modelConfigDifferences(sutModelPath: string, oracleModelPath: string): string[] {
  const sut = readGguf(sutModelPath).metadata;
  const oracle = readGguf(oracleModelPath).metadata;
  const keys = [...new Set([...sut.keys(), ...oracle.keys()])].filter((key) => !key.startsWith("general.") && !key.startsWith("tokenizer.")).sort();
  return keys.flatMap((key) => {
    const mine = sut.get(key);
    const theirs = oracle.get(key);
    if (mine !== undefined && theirs !== undefined && show(mine.value) === show(theirs.value)) return [];
    return [`${key} ${mine === undefined ? "absent" : show(mine.value)} (oracle ${theirs === undefined ? "absent" : show(theirs.value)})`];
  });
}
