import { spawnSync } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { dirname, join } from "node:path";
import type { SpecialTokenMode } from "../suites/tokenizer-suite.js";
import { llamaServerPath } from "./llama-server-binary.js";
import { LlamaCppTokenizerSut, type LlamaCppTokenizer } from "./llamacpp-tokenizer.js";
import type { SutProvenance, SystemUnderTest } from "./types.js";

/** Where scripts/build-llama-server.sh puts llama-tokenize: next to llama-server, built from the same llama.cpp source. */
export function llamaTokenizePath(): string {
  return join(dirname(llamaServerPath()), "llama-tokenize");
}

/** The built llama-tokenize, or undefined when this machine has not built it. */
function builtLlamaTokenize(): string | undefined {
  const path = llamaTokenizePath();
  try {
    accessSync(path, constants.X_OK);
    return path;
  } catch {
    return undefined;
  }
}

/** One text through llama-tokenize is one process that reads the vocabulary; 30 s is ample even for 262,144 pieces on a loaded machine. */
const CALL_TIMEOUT_MS = 30_000;

/**
 * llama.cpp's own tokenizer CLI (tools/tokenize/tokenize.cpp) as a second llama.cpp side of a
 * tokenizer suite: one process per text and mode, the text on stdin byte for byte (`--no-escape`:
 * its default turns `\n` written as two characters into a newline), nothing added (`--no-bos`),
 * special-token text parsed (its default) or not (`--no-parse-special`), ids printed as a list
 * (`--ids`). It cannot detokenize: the round trip and the pieces a difference names come from the
 * embedded llama.cpp on the same file. When the binary is not built, `missing` says so and the arm's
 * checks are SKIPPED with it, never passed.
 */
export class LlamaTokenizeCliSut implements SystemUnderTest, LlamaCppTokenizer {
  private constructor(
    readonly label: string,
    readonly provenance: SutProvenance,
    private readonly binary: string | undefined,
    private readonly modelPath: string,
    private readonly embedded: LlamaCppTokenizerSut,
  ) {}

  /** Each text's ids per mode: the parity check and the round trip both ask for the parsed ids, and a call costs a process start and a vocabulary load. */
  private readonly answered = new Map<string, number[]>();

  static async open(modelPath: string, label: string): Promise<LlamaTokenizeCliSut> {
    const embedded = await LlamaCppTokenizerSut.open(modelPath, label);
    const binary = builtLlamaTokenize();
    const provenance: SutProvenance = { ...embedded.provenance, cpu: undefined, kind: "llama-tokenize", engine: `llama-tokenize (${binary ?? "not built"}), built by scripts/build-llama-server.sh from the source of ${embedded.provenance.engine}` };
    return new LlamaTokenizeCliSut(label, provenance, binary, modelPath, embedded);
  }

  /** Why this side cannot run, or undefined when it can. */
  get missing(): string | undefined {
    return this.binary === undefined ? `llama-tokenize is not built (${llamaTokenizePath()} is missing): scripts/build-llama-server.sh builds it with llama-server` : undefined;
  }

  tokenizeText(text: string, mode: SpecialTokenMode): number[] {
    const key = `${mode}\u0000${text}`;
    let ids = this.answered.get(key);
    if (ids === undefined) this.answered.set(key, ids = this.runTool(text, mode));
    return [...ids];
  }

  private runTool(text: string, mode: SpecialTokenMode): number[] {
    if (this.binary === undefined) throw new Error(this.missing);
    // The tool parses special-token text by default (it has no --parse-special flag; that one is llama-imatrix's).
    const args = ["-m", this.modelPath, "--stdin", "--ids", "--no-bos", "--no-escape", "--log-disable", ...(mode === "plain" ? ["--no-parse-special"] : [])];
    const result = spawnSync(this.binary, args, { input: text, encoding: "utf8", timeout: CALL_TIMEOUT_MS, maxBuffer: 64 * 1024 * 1024 });
    if (result.error !== undefined) throw new Error(`llama-tokenize did not run: ${result.error.message}`);
    if (result.status !== 0) throw new Error(`llama-tokenize exited ${result.status ?? result.signal}: ${result.stderr.trim().split("\n").slice(-2).join(" / ")}`);
    const ids: unknown = JSON.parse(result.stdout.trim());
    if (!Array.isArray(ids) || !ids.every((id) => Number.isInteger(id) && id >= 0)) throw new Error(`llama-tokenize printed no id list: ${JSON.stringify(result.stdout.slice(0, 80))}`);
    return ids as number[];
  }

  detokenizeIds(ids: readonly number[]): string {
    return this.embedded.detokenizeIds(ids);
  }

  piece(id: number): string {
    return this.embedded.piece(id);
  }

  async close(): Promise<void> {
    await this.embedded.close();
  }
}
