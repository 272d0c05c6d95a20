import { existsSync, readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { BenchError } from "../errors.js";

/** A parity prompt as a suite file may write it: the text, or a stretch of a text file (a long-context prompt). */
export type PromptEntry = string | { readonly file: string; readonly from?: number; readonly chars: number };

/**
 * The prompt texts of a suite file, each stretch cut from its file (relative to the suite). A
 * stretch the file does not hold is refused, never shortened: a shorter prompt tests less context.
 */
export function promptTexts(entries: readonly PromptEntry[], suitePath: string): string[] {
  return entries.map((entry, i) => {
    if (typeof entry === "string") return entry;
    const path = resolve(dirname(suitePath), entry.file);
    const field = `prompts.${i}.file`;
    if (!existsSync(path)) throw new BenchError(`prompt file ${entry.file} not found (looked at ${path})`, { file: suitePath, field, fix: "name a text file relative to the suite file" });
    // Characters, not UTF-16 units: a stretch never splits a character.
    const text = [...readFileSync(path, "utf8")];
    const from = entry.from ?? 0;
    if (from + entry.chars > text.length) {
      throw new BenchError(`prompt file ${entry.file} holds ${text.length} characters; the prompt asks for ${entry.chars} from ${from}`, { file: suitePath, field: `prompts.${i}.chars`, fix: `ask for at most ${Math.max(0, text.length - from)} characters, or use a longer file` });
    }
    return text.slice(from, from + entry.chars).join("");
  });
}
