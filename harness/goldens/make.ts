import { readGguf } from "../gguf/read.js";
import type { LlamaCppSut } from "../sut/llamacpp.js";
import { tokenizerFingerprint } from "../gguf/tokenizer-fingerprint.js";
import { openLlamaCppOracle, ORACLE_NAME, oracleSettings } from "../oracle/llamacpp-oracle.js";
import type { ParitySuite } from "../suites/parity-suite.js";
import { HARNESS_VERSION } from "../version.js";
import { resolveModel, type ModelRef } from "../fixtures/registry.js";
import { loadParitySuite } from "../suites/load.js";
import { goldensDir, promptIdsSha256, promptTextsSha256, readGoldens, writeGoldens } from "./goldens.js";
import { goldensGapDiff, type GoldensGapDiff } from "./gap-diff.js";
import { creationTime, type GoldensManifest } from "./manifest.js";

/** Evaluates the oracle on a suite's prompts and writes goldens/<model>/<suite>/ atomically. */
export async function makeGoldens(suite: ParitySuite, model: ModelRef, directory = goldensDir(goldensModelDirName(model), suite.name)): Promise<GoldensManifest> {
  let oracle: LlamaCppSut | undefined = await openLlamaCppOracle(model);
  try {
    const promptIds = await oracle.tokenize(suite.prompts);
    const longest = Math.max(...promptIds.map((ids) => ids.length)) + suite.max_tokens;
    // The recipe's own context holds most suites; the model is loaded again only for longer requests.
    if (oracleSettings(longest).contextSize > oracleSettings(0).contextSize) {
      await oracle.close();
      oracle = undefined;
      oracle = await openLlamaCppOracle(model, longest);
    }
    const greedyIds = await oracle.greedy(promptIds.map((ids) => ({ promptIds: ids, maxTokens: suite.max_tokens })));
    const topk = await oracle.teacherForcedTopK(promptIds.map((ids, p) => ({ promptIds: ids, continuationIds: greedyIds[p], k: suite.top_k })));
    return await writeGoldens(
      directory,
      {
        promptIds,
        greedyIds,
        topkIds: topk.map((prompt) => prompt.map((row) => [...row.ids])),
        topkLogprobs: topk.map((prompt) => prompt.map((row) => [...row.logprobs])),
      },
      {
        schema_version: 1,
        suite: suite.name,
        model: { id: model.id, file: model.path.split("/").pop()!, sha256: oracle.provenance.modelSha256!, bytes: oracle.provenance.modelBytes! },
        oracle: { name: ORACLE_NAME, engine: oracle.provenance.engine, settings: oracle.provenance.settings, ...(oracle.provenance.cpu === undefined ? {} : { cpu: oracle.provenance.cpu }) },
        tokenizer: { fingerprint: tokenizerFingerprint(readGguf(model.path)) },
        prompts: { count: promptIds.length, texts_sha256: promptTextsSha256(suite.prompts), ids_sha256: promptIdsSha256(promptIds) },
        T: suite.max_tokens,
        K: suite.top_k,
        sampler: { temperature: 0, decoding: "greedy" },
        created: creationTime(),
        harness_version: HARNESS_VERSION,
      },
    );
  } finally {
    await oracle?.close();
  }
}

/** goldens/<this>/<suite>: `tiny-random.F32` for fixtures, the file's base name for user models. */
export function goldensModelDirName(model: ModelRef): string {
  return model.quant === "file" ? model.name : `${model.name}.${model.quant}`;
}

/**
 * Re-makes one committed goldens directory in place from what its manifest names (suite, model)
 * and reports what moved. The old goldens are read first, without the model check: the model's
 * bytes are what changed.
 */
export async function remakeGoldens(directory: string): Promise<GoldensGapDiff> {
  const before = readGoldens(directory);
  const suite = loadParitySuite(before.manifest.suite);
  const model = await resolveModel(before.manifest.model.id);
  await makeGoldens(suite, model, directory);
  return goldensGapDiff(before, readGoldens(directory));
}
