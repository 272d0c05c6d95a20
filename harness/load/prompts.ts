import { readFileSync } from "node:fs";
import { BenchError } from "../errors.js";
import { SeededRandom } from "../fixtures/seeded-random.js";

export interface LoadPrompt {
  readonly prompt: string | number[];
  readonly maxTokens: number;
}

const WORDS = ["the", "model", "runs", "fast", "on", "new", "silicon", "and", "every", "kernel", "must", "match", "its", "reference", "today"];

/**
 * Random prompts of an exact token length: words drawn from a seeded generator, then trimmed with
 * the server's own tokenizer until the count is exact.
 */
export async function randomPrompts(count: number, inputTokens: number, outputTokens: number, seed: number, tokenize: ((text: string) => Promise<number[]>) | undefined): Promise<LoadPrompt[]> {
  return promptsOfLengths(Array.from({ length: count }, () => inputTokens), outputTokens, seed, tokenize);
}

/** randomPrompts with each prompt's own token length. */
export async function promptsOfLengths(lengths: readonly number[], outputTokens: number, seed: number, tokenize: ((text: string) => Promise<number[]>) | undefined): Promise<LoadPrompt[]> {
  const random = new SeededRandom(seed);
  const prompts: LoadPrompt[] = [];
  for (const inputTokens of lengths) {
    let text = "";
    while (text.length < inputTokens * 8) text += `${WORDS[Math.floor(random.uniform() * WORDS.length)]} `;
    if (tokenize !== undefined) {
      const ids = await tokenize(text);
      // Token-id prompts hit the length exactly whatever the tokenizer merges.
      prompts.push({ prompt: ids.slice(0, inputTokens), maxTokens: outputTokens });
    } else {
      prompts.push({ prompt: text.split(" ").slice(0, inputTokens).join(" "), maxTokens: outputTokens });
    }
  }
  return prompts;
}

/**
 * `count` prompt lengths from `min` to `max` tokens, log-uniform (as many prompts between 50 and 200
 * tokens as between 1,000 and 4,000: short requests are common, long ones are what a slot must
 * hold), seeded; the first two are `min` and `max`, so every set holds both ends.
 */
export function spreadPromptLengths(count: number, min: number, max: number, seed: number): number[] {
  const random = new SeededRandom(seed);
  return Array.from({ length: count }, (_, i) => (i === 0 ? min : i === 1 ? max : Math.round(min * Math.pow(max / min, random.uniform()))));
}

/** Prompts sharing a common prefix (prefix-cache behaviour): prefix + a short distinct tail. */
export function sharedPrefixPrompts(count: number, prefix: string, outputTokens: number): LoadPrompt[] {
  return Array.from({ length: count }, (_, i) => ({ prompt: `${prefix} Question ${i}: what comes next?`, maxTokens: outputTokens }));
}

/** User prompts, one JSON object per line: {"prompt": "…", "max_tokens": N}. */
export function jsonlPrompts(path: string, defaultMaxTokens: number): LoadPrompt[] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new BenchError(`cannot read (${(error as NodeJS.ErrnoException).code ?? String(error)})`, { file: path, fix: "check the path" });
  }
  return text.split("\n").filter((line) => line.trim() !== "").map((line, i) => {
    let row: { prompt?: unknown; max_tokens?: unknown };
    try {
      row = JSON.parse(line);
    } catch {
      throw new BenchError("line is not JSON", { file: path, field: `line ${i + 1}`, fix: 'write one {"prompt": "...", "max_tokens": N} object per line' });
    }
    if (typeof row.prompt !== "string" || row.prompt === "") throw new BenchError("prompt must be a non-empty string", { file: path, field: `line ${i + 1}: prompt`, fix: "add the prompt text" });
    if (row.max_tokens !== undefined && (!Number.isInteger(row.max_tokens) || (row.max_tokens as number) < 1)) throw new BenchError("max_tokens must be a positive integer", { file: path, field: `line ${i + 1}: max_tokens`, fix: "use a positive integer" });
    return { prompt: row.prompt, maxTokens: (row.max_tokens as number | undefined) ?? defaultMaxTokens };
  });
}
