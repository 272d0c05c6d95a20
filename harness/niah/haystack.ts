import { BenchError } from "../errors.js";
import type { SystemUnderTest, TokenId } from "../sut/types.js";
import type { ResolvedNiahSuite } from "../suites/niah-suite.js";

export interface Haystack {
  readonly promptIds: TokenId[];
  /** Prompt length in the SUT's tokens (BOS included), within the suite's tolerance of the target. */
  readonly tokens: number;
  /** Token offset of the needle sentence within the document: int(document tokens × depth). */
  readonly needleOffset: number;
}

const MAX_ITERATIONS = 24;

/** `count` characters of the filler, cycled. */
function fillerText(filler: string, count: number): string {
  return filler.repeat(Math.ceil(count / filler.length) + 1).slice(0, Math.max(0, count));
}

/**
 * Refuses a needle the SUT's tokenizer can only spell with byte-fallback or unknown tokens: such a
 * needle tests the tokenizer, not retrieval, and a copy-style model could never repeat it.
 */
export async function assertNeedleRepresentable(sut: SystemUnderTest, needle: string, suitePath: string): Promise<void> {
  const [ids] = await sut.tokenize!([needle]);
  const kinds = await sut.inspectTokens!(ids.slice(1));
  const bad = kinds.findIndex((kind) => kind === "byte" || kind === "unknown");
  if (bad >= 0) {
    throw new BenchError(`needle "${needle}" cannot be represented by the SUT's tokenizer (token ${bad + 1} is a ${kinds[bad]} piece)`, {
      file: suitePath, field: "needle_alphabet", fix: "use characters the model's vocabulary holds as text tokens",
    });
  }
}

/**
 * Builds the prompt `prefix + document + question` with the SUT's own tokenizer, where the
 * document is filler with the needle sentence inserted at token offset int(len × depth), grown or
 * cut one character at a time until the whole prompt is `length` tokens (±tolerance).
 */
export async function buildHaystack(sut: SystemUnderTest, spec: ResolvedNiahSuite, needle: string, length: number, depth: number): Promise<Haystack> {
  const sentence = spec.needleSentence.replace("{needle}", needle);
  const tokenize = async (text: string): Promise<TokenId[]> => (await sut.tokenize!([text]))[0];
  const compose = async (fillerChars: number) => {
    const document = fillerText(spec.filler, fillerChars);
    const documentIds = await tokenize(document);
    const documentTokens = documentIds.length - 1; // BOS
    const needleOffset = Math.floor(documentTokens * depth);
    // The character offset of that token boundary: the text of the first needleOffset tokens.
    const [head] = await sut.detokenize!([documentIds.slice(1, 1 + needleOffset)]);
    const split = head.replace(/^ /, "").length;
    const promptText = spec.prefix + document.slice(0, split) + sentence + document.slice(split) + spec.question;
    const promptIds = await tokenize(promptText);
    return { promptIds, tokens: promptIds.length, needleOffset };
  };
  const overhead = (await tokenize(spec.prefix + sentence + spec.question)).length;
  const charsPerToken = spec.filler.length / Math.max(1, (await tokenize(spec.filler)).length - 1);
  let fillerChars = Math.max(0, Math.round((length - overhead) * charsPerToken));
  let best: Haystack | undefined;
  for (let i = 0; i < MAX_ITERATIONS; i++) {
    const attempt = await compose(fillerChars);
    if (best === undefined || Math.abs(attempt.tokens - length) < Math.abs(best.tokens - length)) best = attempt;
    const miss = length - attempt.tokens;
    if (miss === 0) break;
    fillerChars = Math.max(0, fillerChars + (Math.abs(miss) > 2 ? Math.round(miss * charsPerToken) : Math.sign(miss)));
  }
  if (best === undefined || Math.abs(best.tokens - length) > spec.lengthTolerance) {
    throw new BenchError(`could not build a ${length}-token haystack (closest: ${best?.tokens} tokens)`, {
      file: spec.suite.path, field: "filler", fix: `use a filler the tokenizer splits finely, or raise length_tolerance (at most 5)`,
    });
  }
  return best;
}
