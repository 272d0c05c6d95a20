import type { Goldens } from "../goldens/goldens.js";
import type { TeacherForcedCache } from "../oracle/teacher-forced-cache.js";
import { classifyPrompt, type PromptParity } from "../parity/classify.js";
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
