import type { Goldens } from "../goldens/goldens.js";
import { loadVerifiedGoldens } from "../goldens/verified.js";
import { resolveModel } from "../fixtures/registry.js";
import { openLlamaCppOracle } from "../oracle/llamacpp-oracle.js";
import { TeacherForcedCache } from "../oracle/teacher-forced-cache.js";
import { classifyPrompt, type PromptParity } from "../parity/classify.js";
import { loadParitySuite } from "../suites/load.js";
import { httpCall } from "../sut/http-call.js";
import { checkGreedyAnswer } from "../sut/answer-shape.js";

/**
 * Accuracy under load: the parity prompts go to the server as token ids while a load point is
 * running, and their greedy ids are classified against the goldens exactly as the parity gate
 * does (oracle teacher-forced where they differ). A batch-dependent numerics bug shows up here.
 */
export async function parityUnderLoad(baseUrl: string, apiKey: string | undefined, goldens: Goldens, oracle: TeacherForcedCache, bandMnats: number, k: number): Promise<PromptParity[]> {
  const ids = await Promise.all(goldens.promptIds.map(async (prompt, p) => {
    const response = await httpCall(`${baseUrl}/v1/completions`, { apiKey, body: { prompt, max_tokens: goldens.manifest.T, temperature: 0, ignore_eos: true } });
    if (response.status !== 200) throw new Error(`a parity prompt under load got HTTP ${response.status}: ${response.text.slice(0, 120)}`);
    const tokenIds = (JSON.parse(response.text) as { choices: { token_ids?: number[] }[] }).choices[0].token_ids;
    if (tokenIds === undefined) throw new Error("the server does not return token ids: parity under load needs them");
    const checked = checkGreedyAnswer({ promptIds: prompt, maxTokens: goldens.manifest.T }, tokenIds);
    if (!checked.ok) throw new Error(`parity prompt ${p} under load: ${checked.reason}`);
    return checked.value;
  }));
  const divergent = ids.map((path, p) => [p, path] as const).filter(([p, path]) => path.join(",") !== goldens.greedyIds[p].join(","));
  const rows = await oracle.rows(divergent.map(([p, path]) => ({ promptIds: goldens.promptIds[p], continuationIds: path, k })));
  const oracleRows = new Map(divergent.map(([p], i) => [p, rows[i]]));
  return ids.map((path, p) => classifyPrompt(p, goldens.greedyIds[p], path, bandMnats, oracleRows.get(p)));
}

/** A parity suite's prompts, ready to be sent during each load point: its goldens and the oracle that classifies a divergence. */
export interface ParityProbe {
  /** Sends the prompts to the server and classifies their answers. */
  ask(baseUrl: string, apiKey: string | undefined): Promise<PromptParity[]>;
  close(): Promise<void>;
}

/**
 * The parity probe for a load run on `servedModel`: undefined, with a warning, when the suite's
 * goldens are for another model (its verdicts would be about a model the server does not run).
 */
export async function openParityProbe(suiteName: string, servedModel: string, warn: (message: string) => void): Promise<ParityProbe | undefined> {
  const suite = loadParitySuite(suiteName);
  const served = await resolveModel(servedModel);
  if ((await resolveModel(suite.oracle.model)).path !== served.path) {
    warn(`no parity under load: ${suiteName}'s goldens are for ${suite.oracle.model}, the server runs ${served.id}`);
    return undefined;
  }
  const { goldens, oracleModel } = await loadVerifiedGoldens(suite);
  const oracle = await openLlamaCppOracle(oracleModel);
  const cache = new TeacherForcedCache(oracle);
  return {
    ask: (baseUrl, apiKey) => parityUnderLoad(baseUrl, apiKey, goldens, cache, suite.band_mnats, suite.top_k),
    close: () => oracle.close(),
  };
}
