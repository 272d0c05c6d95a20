import { existsSync } from "node:fs";
import { join } from "node:path";
import { BenchError } from "../errors.js";
import { resolveModel } from "../fixtures/registry.js";
import { GOLDEN_LOGPROB_TOLERANCE_NATS, topKDifference } from "../goldens/logprob-tolerance.js";
import { assertGoldensMatchModel } from "../goldens/model-check.js";
import type { GoldensCheck } from "../goldens/verify.js";
import { SUITES_DIR } from "../paths.js";
import { loadSuite } from "../suites/load.js";
import { assertCorpusGoldensMatchSuite, CORPUS_MANIFEST_FILE, evaluateBase, readCorpusGoldens, type CorpusGoldens } from "./corpus-goldens.js";

/** Where a fresh evaluation of the base leaves the committed goldens: ids exactly, log-probs within the CPU tolerance; undefined when it does not. */
export function corpusGoldensDifference(committed: Pick<CorpusGoldens, "chunks" | "base">, fresh: Pick<CorpusGoldens, "chunks" | "base">): string | undefined {
  const chunk = fresh.chunks.findIndex((c, i) => [...c.promptIds, ...c.continuationIds].join(",") !== [...committed.chunks[i].promptIds, ...committed.chunks[i].continuationIds].join(","));
  if (chunk >= 0 || fresh.chunks.length !== committed.chunks.length) return `the corpus tokenizes to other chunk ids (chunk ${Math.max(0, chunk)})`;
  const topK = topKDifference(committed.base.map((c) => c.map((p) => p.topK)), fresh.base.map((c) => c.map((p) => p.topK)));
  if (topK !== undefined) return `top-K: ${topK}`;
  for (const [c, positions] of fresh.base.entries()) {
    const j = positions.findIndex((p, i) => !(Math.abs(p.nextLogprob - committed.base[c][i].nextLogprob) <= GOLDEN_LOGPROB_TOLERANCE_NATS));
    if (j >= 0) return `chunk ${c} position ${j}: next-token log-prob ${positions[j].nextLogprob} vs ${committed.base[c][j].nextLogprob}`;
  }
  return undefined;
}

/**
 * Re-checks one directory of corpus goldens: hashes and shapes, the model artifact it names, and,
 * where the suite it was made for is a built-in one, that suite's corpus and chunking; with
 * `recompute`, the base is evaluated again and must give the same ids and log-probs within tolerance.
 */
export async function verifyCorpusGoldens(directory: string, options: { recompute?: boolean } = {}): Promise<GoldensCheck> {
  try {
    const goldens = readCorpusGoldens(directory);
    const manifestPath = join(directory, CORPUS_MANIFEST_FILE);
    const model = await resolveModel(goldens.manifest.model.id);
    await assertGoldensMatchModel(goldens, model, CORPUS_MANIFEST_FILE);
    const suitePath = join(SUITES_DIR, `${goldens.manifest.suite}.json`);
    const suite = existsSync(suitePath) ? loadSuite(suitePath) : undefined;
    if (suite !== undefined && suite.kind === "perplexity") {
      assertCorpusGoldensMatchSuite(goldens, suite);
      if (options.recompute === true) {
        const difference = corpusGoldensDifference(goldens, await evaluateBase(suite, model));
        if (difference !== undefined) throw new BenchError(`re-running the base gives other goldens: ${difference}`, { file: manifestPath, fix: `ids must match exactly, log-probs within ${GOLDEN_LOGPROB_TOLERANCE_NATS} nats: check the engine version and settings` });
      }
    } else if (options.recompute === true) {
      throw new BenchError(`--recompute needs the suite the goldens were made for, and suites/${goldens.manifest.suite}.json is no perplexity suite`, { file: manifestPath, field: "suite", fix: "re-make them with bench goldens make --suite PATH and compare by hand" });
    }
    return { status: "ok", directory, warnings: [] };
  } catch (error) {
    if (error instanceof BenchError) return { status: "mismatch", directory, reason: error.oneLine() };
    throw error;
  }
}
