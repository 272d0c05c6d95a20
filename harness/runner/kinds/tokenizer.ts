import { dirname, resolve } from "node:path";
import { BenchError } from "../../errors.js";
import { resolveModel } from "../../fixtures/registry.js";
import { sha256File } from "../../io/sha256.js";
import type { RunnerTokenizerArm, TokenizerArm, TokenizerSuite } from "../../suites/tokenizer-suite.js";
import { LlamaTokenizeCliSut } from "../../sut/llama-tokenize-cli.js";
import { LlamaCppTokenizerSut, type LlamaCppTokenizer } from "../../sut/llamacpp-tokenizer.js";
import { openStdioSut } from "../../sut/stdio.js";
import type { SystemUnderTest } from "../../sut/types.js";
import { readCorpus } from "../../tokenizer/corpus.js";
import { armsByLabel, modelArms, selectIndices } from "../arm-selection.js";
import { fillPlaceholders, type SutContext } from "../open-sut.js";
import type { ResolvedRunOptions } from "../run-options.js";
import { runTokenizerArm } from "../tokenizer-runner.js";
import { llamaCppSide, referenceSide, runnerSide } from "../tokenizer-sides.js";
import type { SuiteKind } from "./kind.js";

/** The sides each known difference may name, per comparison. */
const WHERE: Readonly<Record<TokenizerSuite["known_differences"][number]["check"], readonly string[]>> = {
  tokenizer_parity: ["parsed", "plain"],
  detokenize_roundtrip: ["llama.cpp", "reference", "runner"],
};

/** The suite's corpus, every known difference naming one of its texts (a typo would silently explain nothing). */
function corpusOf(suite: TokenizerSuite) {
  const corpus = readCorpus(resolve(dirname(suite.path), suite.corpus));
  suite.known_differences.forEach((known, i) => {
    if (!corpus.some((text) => text.name === known.text)) {
      throw new BenchError(`known difference names no text of the corpus: "${known.text}"`, { file: suite.path, field: `known_differences[${i}].text`, fix: `use one of the names in ${suite.corpus}` });
    }
    const sides = WHERE[known.check];
    if (!sides.includes(known.where)) {
      throw new BenchError(`"${known.where}" is no side of ${known.check}`, { file: suite.path, field: `known_differences[${i}].where`, fix: `use one of ${sides.join(", ")}` });
    }
  });
  return corpus;
}

/** A runner arm is held to llama.cpp, a llama.cpp arm to its reference: a field of the other kind would be silently ignored. */
function assertArmFields(suite: TokenizerSuite): void {
  // As loaded from JSON: the schema requires each kind's own field, not the other's absence.
  (suite.arms as ReadonlyArray<{ readonly label: string; readonly side?: string; readonly reference?: unknown; readonly command?: unknown }>).forEach((arm, i) => {
    if (arm.side === "runner" && arm.reference !== undefined) {
      throw new BenchError(`arm "${arm.label}" is a runner arm: it is held to llama.cpp's tokenizer of its model, not to a reference`, { file: suite.path, field: `arms[${i}].reference`, fix: "drop reference, or drop \"side\": \"runner\" and command to hold llama.cpp to the reference" });
    }
    if (arm.side !== "runner" && arm.command !== undefined) {
      throw new BenchError(`arm "${arm.label}" has a command but is no runner arm`, { file: suite.path, field: `arms[${i}].command`, fix: "add \"side\": \"runner\", or drop command" });
    }
  });
}

/**
 * With --runner, one required runner arm on the vocabulary of the arm --arm names (else the first),
 * held to llama.cpp's tokenizer of that arm's model, as --runner does for the model suites.
 */
function tokenizerArms(suite: TokenizerSuite, options: ResolvedRunOptions): TokenizerArm[] {
  if (options.runner === undefined) return modelArms(suite, options);
  const template = armsByLabel(suite, options)[0] ?? suite.arms[0];
  const runner: RunnerTokenizerArm = { label: "runner", model: options.model ?? template.model, side: "runner", command: options.runner, gate: "required" };
  return [runner];
}

/** What one arm opens: llama.cpp's tokenizer of its model, or (a runner arm) the runner, whose llama.cpp side is opened with its checks. */
async function openArm(arm: TokenizerArm, context: SutContext): Promise<SystemUnderTest | (SystemUnderTest & LlamaCppTokenizer)> {
  const { path } = await resolveModel(arm.model);
  if (arm.side === "runner") {
    return openStdioSut(arm.command.map((part) => fillPlaceholders(part, path)), { label: arm.label, modelPath: path, modelSha256: await sha256File(path), ...context });
  }
  return arm.side === "llama-tokenize" ? LlamaTokenizeCliSut.open(path, arm.label) : LlamaCppTokenizerSut.open(path, arm.label);
}

const isLlamaCppTokenizer = (opened: SystemUnderTest): opened is SystemUnderTest & LlamaCppTokenizer => "tokenizeText" in opened;

/**
 * llama.cpp's tokenizer (the model's GGUF, vocabulary only; embedded or the llama-tokenize CLI) held
 * to the Hugging Face tokenizer of the same vocabulary over a corpus; or a runner's tokenizer held
 * to llama.cpp's (the ids the goldens were made from).
 */
export const tokenizerKind: SuiteKind<TokenizerSuite, TokenizerArm> = {
  arms: tokenizerArms,
  async run(suite, arms, battery) {
    assertArmFields(suite);
    const corpus = corpusOf(suite);
    const texts = selectIndices(corpus.length, battery.options.prompts, "corpus text", "--prompt", suite.path).map((index) => ({ ...corpus[index], index }));
    await battery.legs(suite, arms, openArm, async (arm, sut, opened, signal) => {
      const scope = { suiteName: suite.name, suite, arm, sut, texts, emit: battery.emit, signal, reproduce: battery.reproduce(suite, arm) };
      if (arm.side === "runner") {
        // The runner is held to the embedded llama.cpp on the same GGUF; llama.cpp's own round trip is the embedded arm's to check.
        const embedded = await LlamaCppTokenizerSut.open((await resolveModel(arm.model)).path, arm.label);
        try {
          const runner = runnerSide(sut);
          return await runTokenizerArm({ ...scope, expected: llamaCppSide(embedded), observed: runner.side, roundTrips: [runner.side], missing: runner.missing });
        } finally {
          await embedded.close();
        }
      }
      if (!isLlamaCppTokenizer(opened)) throw new Error(`arm "${arm.label}" opened no llama.cpp tokenizer`);
      const llamaCpp = llamaCppSide(opened);
      const reference = referenceSide(arm.reference);
      return runTokenizerArm({ ...scope, expected: reference, observed: llamaCpp, roundTrips: [llamaCpp, reference], missing: opened.missing });
    });
  },
};
