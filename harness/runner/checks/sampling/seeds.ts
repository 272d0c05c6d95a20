import { sampled, type SampledRequest } from "../../../sampling/sampling-wire.js";
import type { TokenId } from "../../../sut/types.js";
import { makeCell } from "../../check.js";
import type { SamplingArmContext, SamplingCheck } from "./sampling-arm-state.js";

/** Tokens per seeded answer, and the setting: long and flat enough that two seeds drawing the same answer honestly is below 1e-6 on tiny-random. */
const TOKENS = 16;
const SETTING = { temperature: 1.5, top_k: 0, top_p: 1, min_p: 0 };
const SEED = 4242;
/** Seeds drawn to show that different seeds differ. */
const DIFFERENT = 6;
/** Requests beside the seeded one in the batch case. */
const NEIGHBOURS = 3;

async function answerOf(context: SamplingArmContext, r: Omit<SampledRequest, "setting" | "stream" | "maxTokens">): Promise<TokenId[]> {
  const answer = await sampled(context.server, { ...r, setting: SETTING, maxTokens: TOKENS, stream: context.samplingArm.stream });
  if (!answer.ok) throw new Error(`a seeded request was refused: HTTP ${answer.status} ${answer.body}`);
  return answer.choices[0];
}

const same = (a: readonly TokenId[], b: readonly TokenId[]) => a.length === b.length && a.every((id, i) => id === b[i]);

/**
 * Seeds as a client relies on them: the same seed gives the same tokens alone (asked twice), in a
 * batch with other requests in flight, and after a prefix-cache hit (the cold answer asked with
 * cache_prompt false, the warm one after the same prompt was answered); different seeds give
 * different tokens; and, on an arm whose seeds keep 53 bits, seeds 2^32 apart differ (an arm that
 * declares 32-bit seeds says so, and that case is not asked). One cell per case.
 */
export const seedsCheck: SamplingCheck<"seeds"> = {
  kind: "sampling",
  name: "seeds",
  needs: ["tokenize"],
  level: ({ context }) => context.suite.checks.seeds,
  async run({ context }, gate) {
    const prompt = context.prompts[0];
    const cold = await answerOf(context, { prompts: [prompt.ids], seed: SEED, extra: { cache_prompt: false } });
    const cases: { name: string; pass: boolean; detail: string }[] = [];
    const again = await answerOf(context, { prompts: [prompt.ids], seed: SEED, extra: { cache_prompt: false } });
    cases.push({ name: "alone", pass: same(cold, again), detail: `seed ${SEED} asked twice alone: [${cold.join(", ")}] then [${again.join(", ")}]` });
    const batch = await Promise.all([
      answerOf(context, { prompts: [prompt.ids], seed: SEED, extra: { cache_prompt: false } }),
      ...Array.from({ length: NEIGHBOURS }, (_, i) => answerOf(context, { prompts: [prompt.ids], seed: SEED + 1000 + i })),
    ]);
    cases.push({ name: "in a batch", pass: same(cold, batch[0]), detail: `seed ${SEED} beside ${NEIGHBOURS} other requests: [${batch[0].join(", ")}]` });
    await answerOf(context, { prompts: [prompt.ids], seed: SEED + 1, extra: { cache_prompt: true } });
    const warm = await answerOf(context, { prompts: [prompt.ids], seed: SEED, extra: { cache_prompt: true } });
    cases.push({ name: "after a cache hit", pass: same(cold, warm), detail: `seed ${SEED} after the same prompt was answered (cache_prompt true): [${warm.join(", ")}]` });
    const answers = await Promise.all(Array.from({ length: DIFFERENT }, (_, i) => answerOf(context, { prompts: [prompt.ids], seed: SEED + 1 + i })));
    const distinct = new Set(answers.map((ids) => ids.join(","))).size;
    cases.push({ name: "different seeds", pass: distinct === DIFFERENT, detail: `${DIFFERENT} seeds gave ${distinct} different answers of ${TOKENS} tokens at ${JSON.stringify(SETTING)}` });
    let wide = `seeds 2^32 apart not asked: the arm declares ${context.samplingArm.seed_bits}-bit seeds`;
    if (context.samplingArm.seed_bits === 53) {
      const far = await answerOf(context, { prompts: [prompt.ids], seed: SEED + 2 ** 32 });
      cases.push({ name: "seeds 2^32 apart", pass: !same(cold, far), detail: `seed ${SEED} + 2^32: [${far.join(", ")}]` });
      wide = "seeds 2^32 apart differ";
    }
    const bad = cases.filter((c) => !c.pass);
    await context.emit({ kind: "cells", cells: cases.map((c) => makeCell(context, "seeds", gate, { prompt: prompt.index, prompt_class: c.name, status: c.pass ? "pass" : "fail", detail: `${c.name}: ${c.detail}` }, ` --prompt ${prompt.index}`)) });
    const checked = `${cases.map((c) => c.name).join(", ")}; ${wide}; speculation not asked`;
    return {
      status: bad.length === 0 ? "pass" : "fail",
      summary: bad.length === 0 ? `${cases.length}/${cases.length} seed cases hold (${checked})` : `FAIL: ${bad.map((c) => c.name).join(", ")}: ${bad[0].detail} (checked: ${checked})`,
      metrics: { cases: cases.length, failed: bad.length, seed_bits: context.samplingArm.seed_bits },
    };
  },
};
