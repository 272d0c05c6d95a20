/**
 * Where a conformance arm's `logprob_tolerance` starts to hide the bug the greedy log-prob checks
 * exist for: our server on tiny-random with the FAKE fault `logprobs-other-row` (each sequence's
 * log-probs read from another sequence's row), judged by greedy_logprobs and greedy_logprobs_echo
 * at a ladder of tolerances, one part widened while the other stays at its default. The upper
 * limit MAX_LOGPROB_TOLERANCE (harness/conformance/greedy-logprobs.ts) is set from this. First
 * it prints how far the fault moves each generated token's log-prob from what the (unfaulted) echo
 * path scores for it, in nats and relative to the larger magnitude: what a tolerance must stay
 * under for the agreement test alone to see the fault.
 *
 *   node dist/scripts/logprob-tolerance-limit.js
 */
import { CONFORMANCE_CHECKS } from "../harness/conformance/checks.js";
import { DEFAULT_LOGPROB_TOLERANCE, logprobsAgree, MAX_LOGPROB_TOLERANCE, type LogprobTolerance } from "../harness/conformance/greedy-logprobs.js";
import { resolveModel } from "../harness/fixtures/registry.js";
import { distribution } from "../harness/stats/distribution.js";
import { httpCall } from "../harness/sut/http-call.js";
import { startManagedServer, stopManagedServer } from "../harness/sut/managed-server.js";
import { SERVER_FAULT_ENV } from "../server/faults.js";

const LADDER = [2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1, 0.2, 0.5, 1, 2, 5];

type Legacy = { choices: { text: string; logprobs: { tokens: string[]; token_logprobs: (number | null)[] } }[] };

/** Each generated token's log-prob (four prompts at once, so a step holds four rows) and echo's for it. */
async function displacements(baseUrl: string): Promise<[number, number][]> {
  const complete = async (body: object) => JSON.parse((await httpCall(`${baseUrl}/v1/completions`, { body: { temperature: 0, logprobs: 1, ...body } })).text) as Legacy;
  const prompts = ["The model runs", "Roses are red", "Once upon a", "Hello there"];
  const generated = await Promise.all(prompts.map((prompt) => complete({ prompt, max_tokens: 12 })));
  const pairs: [number, number][] = [];
  for (const [n, prompt] of prompts.entries()) {
    const own = generated[n].choices[0].logprobs;
    const echoed = (await complete({ prompt: prompt + generated[n].choices[0].text, max_tokens: 0, echo: true })).choices[0].logprobs;
    const tail = echoed.token_logprobs.slice(-own.tokens.length);
    // Only where echo re-tokenized the text into the same tokens (as the check compares).
    if (echoed.tokens.slice(-own.tokens.length).join("\u0000") !== own.tokens.join("\u0000")) continue;
    own.token_logprobs.forEach((a, i) => pairs.push([a!, tail[i]!]));
  }
  return pairs;
}

const quantiles = (values: number[]) => {
  const d = distribution(values)!;
  return `n ${d.n}, min ${d.min.toExponential(1)}, p10 ${d.p10.toExponential(1)}, median ${d.median.toExponential(1)}, max ${d.max.toExponential(1)}`;
};

// The managed server inherits this process's environment, the fault with it.
process.env[SERVER_FAULT_ENV] = "logprobs-other-row";
const server = await startManagedServer({ modelPath: (await resolveModel("tiny-random:F32")).path, slots: 4, queue: 16, contextSize: 1024, threads: 1, flashAttention: false, bootTimeoutS: 120 });
try {
  const pairs = await displacements(server.baseUrl);
  const gaps = pairs.map(([a, b]) => Math.abs(a - b));
  const outside = pairs.filter(([a, b]) => !logprobsAgree(a, b, MAX_LOGPROB_TOLERANCE)).length;
  console.log(`the fault's displacement, nats: ${quantiles(gaps)}\n  relative to the larger magnitude: ${quantiles(pairs.map(([a, b], i) => gaps[i] / Math.max(Math.abs(a), Math.abs(b))))}`
    + `\n  outside the limit (abs ${MAX_LOGPROB_TOLERANCE.abs}, rel ${MAX_LOGPROB_TOLERANCE.rel}): ${outside} of ${pairs.length}`);
  for (const part of ["abs", "rel"] as const) {
    for (const value of LADDER) {
      const tolerance: LogprobTolerance = { ...DEFAULT_LOGPROB_TOLERANCE, [part]: value };
      const target = { baseUrl: server.baseUrl, model: "m", expectMetrics: [], logprobTolerance: tolerance };
      // One after the other, as a run sends them: each check's prompts alone make up the server's steps.
      const verdicts = [await CONFORMANCE_CHECKS.greedy_logprobs(target), await CONFORMANCE_CHECKS.greedy_logprobs_echo(target)];
      console.log(`abs ${tolerance.abs} rel ${tolerance.rel}: greedy_logprobs ${verdicts[0].status.toUpperCase()}, greedy_logprobs_echo ${verdicts[1].status.toUpperCase()}`
        + verdicts.map((v) => `\n  ${v.detail.slice(0, 110)}…${v.detail.slice(-40)}`).join(""));
    }
  }
} finally {
  await stopManagedServer(server);
}
