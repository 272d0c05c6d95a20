import { readdirSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { BenchError } from "../errors.js";

/** How C++ engines commit prompt ids: one headerless little-endian int32 file per prompt. */
const RAW_PROMPT_FILE = /^p(\d+)_prompt\.i32$/;

/**
 * Whether a `--prompts` path names the raw per-prompt layout: a directory holding
 * `p{i}_prompt.i32` files, or one of those files (its directory is meant).
 */
export function isRawPromptLayout(path: string): boolean {
  return RAW_PROMPT_FILE.test(basename(path)) || (statSafe(path)?.isDirectory() ?? false);
}

function statSafe(path: string): ReturnType<typeof statSync> | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}

function rawPromptDirectory(path: string): string {
  return RAW_PROMPT_FILE.test(basename(path)) ? dirname(path) : path;
}

/** The file that holds prompt `index` in the raw layout `path` names (the directory or one of its files). */
export function rawPromptFile(path: string, index: number): string {
  return join(rawPromptDirectory(path), `p${index}_prompt.i32`);
}

/**
 * Reads `p0_prompt.i32` … `p{count-1}_prompt.i32` (ids as fed to the model, BOS included if the
 * engine fed one). Exactly `count` files, numbered without gaps, each a non-empty whole number of
 * int32 values: anything else is an error naming the file, never a silent partial import.
 */
export function readRawPrompts(path: string, count: number): number[][] {
  const directory = rawPromptDirectory(path);
  let names: string[];
  try {
    names = readdirSync(directory);
  } catch (error) {
    throw new BenchError(`cannot read the prompt directory (${(error as NodeJS.ErrnoException).code ?? String(error)})`, { file: directory, fix: "pass the directory holding p0_prompt.i32 …" });
  }
  const indices = names.flatMap((name) => {
    const match = RAW_PROMPT_FILE.exec(name);
    return match === null ? [] : [Number(match[1])];
  });
  if (indices.length === 0) {
    throw new BenchError("holds no p{i}_prompt.i32 files", { file: directory, fix: "pass the directory the engine wrote its p0_prompt.i32 … files to, or a prompt ids .npy" });
  }
  const extra = indices.filter((i) => i >= count).sort((a, b) => a - b);
  if (extra.length > 0) {
    throw new BenchError(`holds p${extra[0]}_prompt.i32, but the greedy ids have ${count} rows`, { file: directory, fix: "pass the prompts that produced these greedy ids" });
  }
  return Array.from({ length: count }, (_, i) => {
    const file = rawPromptFile(path, i);
    let bytes: Buffer;
    try {
      bytes = readFileSync(file);
    } catch (error) {
      throw new BenchError(`cannot read (${(error as NodeJS.ErrnoException).code ?? String(error)})`, { file, fix: `the greedy ids have ${count} rows: p0_prompt.i32 … p${count - 1}_prompt.i32 must all exist` });
    }
    if (bytes.length === 0 || bytes.length % 4 !== 0) {
      throw new BenchError(`${bytes.length} bytes is not a non-empty whole number of int32 values`, { file, fix: "write the prompt ids as raw little-endian int32 (numpy: ids.astype('<i4').tofile(path))" });
    }
    return Array.from({ length: bytes.length / 4 }, (_, j) => bytes.readInt32LE(j * 4));
  });
}
