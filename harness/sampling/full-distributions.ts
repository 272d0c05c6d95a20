import { resolveModel } from "../fixtures/registry.js";
import { validateLlamaMetadata } from "../gguf/llama-metadata.js";
import { readGguf } from "../gguf/read.js";
import { openLlamaCppOracle } from "../oracle/llamacpp-oracle.js";
import type { LlamaCppSut } from "../sut/llamacpp.js";
import type { TokenId } from "../sut/types.js";

/** The oracle's full next-token log-probs by prompt, one embedded llama.cpp per model, opened on the first request. */
export class FullDistributions {
  private readonly oracles = new Map<string, Promise<LlamaCppSut>>();
  private readonly rows = new Map<string, Float64Array>();

  async at(model: string, ids: readonly TokenId[]): Promise<{ logprobs: Float64Array; vocabSize: number }> {
    const resolved = await resolveModel(model);
    const vocabSize = validateLlamaMetadata(readGguf(resolved.path), resolved.path).vocabSize;
    const key = `${resolved.path}\n${ids.join(",")}`;
    let row = this.rows.get(key);
    if (row === undefined) {
      const oracle = await this.oracle(resolved.path, model);
      // The distribution before a continuation token is the prompt's last position's; which token follows does not matter.
      const [[top]] = await oracle.teacherForcedTopK([{ promptIds: ids, continuationIds: [0], k: vocabSize }]);
      row = new Float64Array(vocabSize).fill(-Infinity);
      top.ids.forEach((id, i) => { row![id] = top.logprobs[i]; });
      this.rows.set(key, row);
    }
    return { logprobs: row, vocabSize };
  }

  async close(): Promise<void> {
    for (const oracle of this.oracles.values()) await (await oracle).close();
  }

  /** Text to ids as the oracle's tokenizer makes them. */
  async tokenize(model: string, texts: readonly string[]): Promise<TokenId[][]> {
    return (await this.oracle((await resolveModel(model)).path, model)).tokenize(texts);
  }

  private async oracle(path: string, model: string): Promise<LlamaCppSut> {
    if (!this.oracles.has(path)) this.oracles.set(path, resolveModel(model).then(openLlamaCppOracle));
    return this.oracles.get(path)!;
  }
}
