import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { BenchError } from "../errors.js";
import type { PerplexitySuite } from "../suites/perplexity-suite.js";

/** A perplexity suite's corpus file: where it is and the text as scored. */
export interface CorpusText {
  readonly path: string;
  readonly text: string;
}

/**
 * Reads the suite's corpus as llama-perplexity's `-f` does: the whole file, one trailing newline
 * dropped (so both tools score the same tokens).
 */
export function readCorpusText(suite: Pick<PerplexitySuite, "path" | "corpus">): CorpusText {
  const path = resolve(dirname(suite.path), suite.corpus);
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    throw new BenchError("the corpus file cannot be read", { file: suite.path, field: "corpus", fix: `name a UTF-8 text file relative to the suite file (${path} is missing)` });
  }
  return { path, text: text.endsWith("\n") ? text.slice(0, -1) : text };
}
