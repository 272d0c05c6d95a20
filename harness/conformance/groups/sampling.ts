import { fail, pass, post, type ConformanceGroup } from "../target.js";

/** Sampling parameters honoured: a seed repeats, top_k 1 is greedy, temperature varies the text. */
export const SAMPLING_CHECKS: ConformanceGroup = {
  async seed_determinism(target) {
    const sample = async (seed: number) => (JSON.parse((await post(target, "/v1/completions", { model: target.model, prompt: "The sky", max_tokens: 12, temperature: 1, seed })).text) as { choices: { text: string }[] }).choices[0].text;
    const [a, b, c] = [await sample(42), await sample(42), await sample(43)];
    if (a !== b) return fail(`seed 42 gave ${JSON.stringify(a)} then ${JSON.stringify(b)}`);
    return pass(`seed 42 twice: ${JSON.stringify(a)}; seed 43: ${JSON.stringify(c)}${a === c ? " (same text: the distribution is peaked)" : ""}`);
  },

  async sampling_honoured(target) {
    const text = async (body: Record<string, unknown>) => (JSON.parse((await post(target, "/v1/completions", { model: target.model, prompt: "Roses are", max_tokens: 12, ...body })).text) as { choices: { text: string }[] }).choices[0].text;
    const greedy = await text({ temperature: 0 });
    const topK1 = await text({ temperature: 1.5, top_k: 1, seed: 7 });
    const hot: string[] = [];
    for (const seed of [1, 2, 3, 4]) hot.push(await text({ temperature: 2, seed }));
    if (topK1 !== greedy) return fail(`top_k 1 at temperature 1.5 gave ${JSON.stringify(topK1)}, greedy is ${JSON.stringify(greedy)}`);
    if (hot.every((t) => t === greedy)) return fail("temperature 2 with four seeds always gave the greedy text: temperature is ignored");
    return pass(`top_k=1 equals greedy ${JSON.stringify(greedy)}; temperature 2 varies across seeds`);
  },
};
