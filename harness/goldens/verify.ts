import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { BenchError } from "../errors.js";
import { resolveModel } from "../fixtures/registry.js";
import { openLlamaCppOracle, ORACLE_NAME, oracleSettings } from "../oracle/llamacpp-oracle.js";
import { GOLDENS_DIR, SUITES_DIR } from "../paths.js";
import { loadParitySuite } from "../suites/load.js";
import { llamaCppEngineVersion, sameLlamaCppEngine } from "../sut/llamacpp.js";
import { promptIdsSha256, promptTextsSha256, readGoldens } from "./goldens.js";
import { assertGoldensMatchModel } from "./model-check.js";
import { recomputeTolerance, topKDifference } from "./logprob-tolerance.js";
import { loadedCpuVariant } from "../cpu/cpu-identity.js";
import { readGguf } from "../gguf/read.js";

export type GoldensCheck =
  | { readonly status: "ok"; readonly directory: string; readonly warnings: readonly string[] }
  | { readonly status: "mismatch"; readonly directory: string; readonly reason: string };

/** Every goldens/<model>/<suite>/ directory holding a manifest (a parity suite's `manifest.json`, unless another file is named). */
export function listGoldensDirectories(root = GOLDENS_DIR, manifestFile = "manifest.json"): string[] {
  if (!existsSync(root)) return [];
  return readdirSync(root, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .flatMap((model) => readdirSync(join(root, model.name), { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && existsSync(join(root, model.name, entry.name, manifestFile)))
      .map((suite) => join(root, model.name, suite.name)));
}

/**
 * Re-checks one goldens directory: file hashes and shapes, the model artifact (sha256, size,
 * tokenizer), the suite's prompts, the prompt ids the oracle's tokenizer gives today, and the
 * oracle's settings. With `recompute`, the oracle is re-run: its greedy ids must match exactly,
 * its top-k log-probs within recomputeTolerance (they depend on the ggml CPU variant).
 */
export async function verifyGoldens(directory: string, options: { recompute?: boolean } = {}): Promise<GoldensCheck> {
  try {
    const goldens = readGoldens(directory);
    const { manifest } = goldens;
    const manifestPath = join(directory, "manifest.json");
    const model = await resolveModel(manifest.model.id);
    await assertGoldensMatchModel(goldens, model);
    const warnings: string[] = [];
    const suitePath = join(SUITES_DIR, `${manifest.suite}.json`);
    if (manifest.prompts.texts_sha256 !== null && existsSync(suitePath)) {
      const suite = loadParitySuite(suitePath);
      if (promptTextsSha256(suite.prompts) !== manifest.prompts.texts_sha256) {
        throw new BenchError("the suite's prompts changed since the goldens were made", { file: manifestPath, field: "prompts.texts_sha256", fix: `re-make them: bench goldens make --suite ${manifest.suite}` });
      }
      if (suite.max_tokens !== manifest.T || suite.top_k !== manifest.K) {
        throw new BenchError(`suite asks T=${suite.max_tokens}, K=${suite.top_k}; goldens hold T=${manifest.T}, K=${manifest.K}`, { file: manifestPath, field: "T", fix: `re-make them: bench goldens make --suite ${manifest.suite}` });
      }
    }
    if (promptIdsSha256(goldens.promptIds) !== manifest.prompts.ids_sha256) {
      throw new BenchError("prompt_ids.npy does not hash to the manifest's ids_sha256", { file: manifestPath, field: "prompts.ids_sha256", fix: "re-make the goldens" });
    }
    const longest = Math.max(...goldens.promptIds.map((ids) => ids.length)) + manifest.T;
    if (manifest.oracle.name === ORACLE_NAME) {
      for (const [key, value] of Object.entries(oracleSettings(longest))) {
        if (manifest.oracle.settings[key] !== value) {
          throw new BenchError(`oracle setting ${key} is ${String(manifest.oracle.settings[key])}, the oracle recipe says ${String(value)}`, {
            file: manifestPath, field: `oracle.settings.${key}`, fix: "re-make the goldens with `bench goldens make`",
          });
        }
      }
      const engine = await llamaCppEngineVersion();
      if (!sameLlamaCppEngine(manifest.oracle.engine, engine)) warnings.push(`made with ${manifest.oracle.engine}, this machine runs ${engine}: numbers may shift; re-make if parity drifts`);
    }
    if (manifest.prompts.texts_sha256 !== null || options.recompute === true) {
      const oracle = await openLlamaCppOracle(model, longest);
      try {
        const suite = existsSync(suitePath) ? loadParitySuite(suitePath) : undefined;
        if (suite !== undefined && manifest.prompts.texts_sha256 !== null) {
          const ids = await oracle.tokenize(suite.prompts);
          if (promptIdsSha256(ids) !== manifest.prompts.ids_sha256) {
            throw new BenchError("the oracle's tokenizer now gives different prompt ids", { file: manifestPath, field: "prompts.ids_sha256", fix: "tokenizer drift: re-make the goldens and review the change" });
          }
        }
        if (options.recompute === true) {
          const greedy = await oracle.greedy(goldens.promptIds.map((ids) => ({ promptIds: ids, maxTokens: manifest.T })));
          const differing = greedy.findIndex((ids, p) => ids.join(",") !== goldens.greedyIds[p].join(","));
          if (differing >= 0) {
            throw new BenchError(`re-running the oracle gives different greedy ids for prompt ${differing}`, { file: join(directory, "greedy_ids.npy"), field: `prompt[${differing}]`, fix: "the oracle is not reproducing its goldens: check the engine version and settings" });
          }
          if (goldens.topkIds !== undefined && goldens.topkLogprobs !== undefined) {
            const fresh = await oracle.teacherForcedTopK(goldens.promptIds.map((ids, p) => ({ promptIds: ids, continuationIds: goldens.greedyIds[p], k: manifest.K })));
            const committed = goldens.topkIds.map((prompt, p) => prompt.map((ids, t) => ({ ids, logprobs: goldens.topkLogprobs![p][t] })));
            const architecture = readGguf(model.path).metadata.get("general.architecture")?.value;
            const tolerance = recomputeTolerance(manifest.oracle.cpu?.variant, loadedCpuVariant(), typeof architecture === "string" ? architecture : undefined);
            const difference = topKDifference(committed, fresh, tolerance.nats);
            if (difference !== undefined) {
              throw new BenchError(`re-running the oracle gives other top-k log-probs: ${difference}`, { file: join(directory, "topk_logprobs.npy"), fix: `ids must match exactly, log-probs within ${tolerance.nats} nats (${tolerance.why}): check the engine version and settings` });
            }
          }
        }
      } finally {
        await oracle.close();
      }
    }
    return { status: "ok", directory, warnings };
  } catch (error) {
    if (error instanceof BenchError) return { status: "mismatch", directory, reason: error.oneLine() };
    throw error;
  }
}
