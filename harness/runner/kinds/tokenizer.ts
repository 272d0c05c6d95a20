import { dirname, resolve } from "node:path";
import { BenchError } from "../../errors.js";
import { resolveModel } from "../../fixtures/registry.js";
import type { TokenizerArm, TokenizerSuite } from "../../suites/tokenizer-suite.js";
import { LlamaTokenizeCliSut } from "../../sut/llama-tokenize-cli.js";
import { LlamaCppTokenizerSut } from "../../sut/llamacpp-tokenizer.js";
import { readCorpus } from "../../tokenizer/corpus.js";
import { referenceTokenizer } from "../../tokenizer/reference-tokenizer.js";
import { modelArms, selectIndices } from "../arm-selection.js";
import { runTokenizerArm } from "../tokenizer-runner.js";
import type { SuiteKind } from "./kind.js";

/** The suite's corpus, every known difference naming one of its texts (a typo would silently explain nothing). */
function corpusOf(suite: TokenizerSuite) {
  const corpus = readCorpus(resolve(dirname(suite.path), suite.corpus));
  suite.known_differences.forEach((known, i) => {
    if (!corpus.some((text) => text.name === known.text)) {
      throw new BenchError(`known difference names no text of the corpus: "${known.text}"`, { file: suite.path, field: `known_differences[${i}].text`, fix: `use one of the names in ${suite.corpus}` });
    }
    const sides = known.check === "tokenizer_parity" ? ["parsed", "plain"] : ["llama.cpp", "reference"];
    if (!sides.includes(known.where)) {
      throw new BenchError(`"${known.where}" is no side of ${known.check}`, { file: suite.path, field: `known_differences[${i}].where`, fix: `use one of ${sides.join(", ")}` });
    }
  });
  return corpus;
}

/** llama.cpp's tokenizer (the model's GGUF, vocabulary only; embedded or the llama-tokenize CLI) held to the Hugging Face tokenizer of the same vocabulary over a corpus. */
export const tokenizerKind: SuiteKind<TokenizerSuite, TokenizerArm> = {
  // A runner speaks the tokenize capability only (BOS added, special text plain), not the two modes compared here.
  arms: (suite, options) => (options.runner !== undefined ? [] : modelArms(suite, options)),
  async run(suite, arms, battery) {
    const corpus = corpusOf(suite);
    const texts = selectIndices(corpus.length, battery.options.prompts, "corpus text", "--prompt", suite.path).map((index) => ({ ...corpus[index], index }));
    const open = async (arm: TokenizerArm) => {
      const { path } = await resolveModel(arm.model);
      return arm.side === "llama-tokenize" ? LlamaTokenizeCliSut.open(path, arm.label) : LlamaCppTokenizerSut.open(path, arm.label);
    };
    await battery.legs(suite, arms, open, async (arm, _sut, tokenizer, signal) => runTokenizerArm({
      suiteName: suite.name, suite, arm, sut: tokenizer, tokenizer, reference: await referenceTokenizer(arm.reference), texts, emit: battery.emit, signal, reproduce: battery.reproduce(suite, arm),
    }));
  },
};
