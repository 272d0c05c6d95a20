/**
 * What our server draws at temperature > 0 (issue 41), on a real `bench serve` of tiny-random:
 * prompts longer than a prefill chunk on the paths that carry a distribution, temperatures small
 * enough to underflow p^(1/T), and seeds past 2^32.
 */
import { test } from "uvu";
import * as assert from "uvu/assert";
import { resolveModel } from "../harness/fixtures/registry.js";
import { FIRST_CHARACTER_ID, printableAscii } from "../harness/fixtures/char-vocab.js";
import { httpCall } from "../harness/sut/http-call.js";
import { startManagedServer, stopManagedServer, type ManagedServer } from "../harness/sut/managed-server.js";

/** A prompt of this many tokens spans several 512-token prefill chunks and fits tiny-random's 4096-token context. */
const LONG_PROMPT = 4000;

let server: ManagedServer;
test.before(async () => {
  const model = await resolveModel("tiny-random:F32");
  server = await startManagedServer({ modelPath: model.path, slots: 2, queue: 8, contextSize: 4096, threads: 1, flashAttention: false, kvCacheType: "F32", bootTimeoutS: 120 });
});
test.after(async () => { await stopManagedServer(server); });

interface Choice {
  readonly text: string;
  readonly token_ids: number[];
  readonly logprobs: { readonly token_ids: number[]; readonly token_logprobs: (number | null)[]; readonly top_token_ids: (number[] | null)[]; readonly top_token_logprobs: (number[] | null)[] } | null;
}

async function complete(body: Record<string, unknown>): Promise<{ status: number; text: string; choice: Choice | undefined }> {
  const response = await httpCall(`${server.baseUrl}/v1/completions`, { body });
  const choice = response.status === 200 ? (JSON.parse(response.text) as { choices: Choice[] }).choices[0] : undefined;
  return { status: response.status, text: response.text, choice };
}

/** A long token-id prompt of printable characters (tiny-random's vocabulary is one character a token). */
const longPrompt = Array.from({ length: LONG_PROMPT }, (_, i) => FIRST_CHARACTER_ID + ((i * 7) % printableAscii().length));

test("a 4,000-token prompt answers sampled (temperature 0.7; temperature omitted, 1) and greedy with echo + logprobs, each drawn from the prompt's last position", async () => {
  const greedy = await complete({ prompt: longPrompt, max_tokens: 4, temperature: 0, ignore_eos: true });
  assert.is(greedy.status, 200, greedy.text);
  const greedyIds = greedy.choice!.token_ids;
  const sampled = await complete({ prompt: longPrompt, max_tokens: 4, temperature: 0.7, seed: 3, ignore_eos: true });
  assert.is(sampled.status, 200, sampled.text);
  assert.is(sampled.choice!.token_ids.length, 4);
  // top_k 1 leaves each draw one token: greedy's, where the draw reads the prompt's last position.
  const topOne = await complete({ prompt: longPrompt, max_tokens: 4, top_k: 1, seed: 3, ignore_eos: true });
  assert.is(topOne.status, 200, topOne.text);
  assert.equal(topOne.choice!.token_ids, greedyIds);
  const echoed = await complete({ prompt: longPrompt, max_tokens: 1, temperature: 0, echo: true, logprobs: 1 });
  assert.is(echoed.status, 200, echoed.text);
  const lp = echoed.choice!.logprobs!;
  assert.is(lp.token_logprobs.length, LONG_PROMPT + 1);
  assert.equal(lp.token_ids, [...longPrompt, greedyIds[0]]);
});

test("a seed draws the same tokens whether the step draws them (the addon, from llama.cpp's row) or the row comes back to be drawn (a request that also asks its log-probs)", async () => {
  for (const [temperature, extra] of [[0.9, {}], [1.3, { top_p: 0.8 }], [0.7, { top_k: 20, min_p: 0.05 }]] as const) {
    const body = { prompt: "In the beginning", max_tokens: 24, temperature, seed: 11, ignore_eos: true, ...extra };
    const inStep = await complete(body);
    const keptRow = await complete({ ...body, logprobs: 1 });
    assert.is(inStep.status, 200, inStep.text);
    assert.is(keptRow.status, 200, keptRow.text);
    assert.equal(inStep.choice!.token_ids, keptRow.choice!.token_ids, `temperature ${temperature} ${JSON.stringify(extra)}`);
    assert.is(keptRow.choice!.logprobs!.token_logprobs.length, 24, "the kept row's path really ran (it reports log-probs)");
    assert.not.equal(inStep.choice!.token_ids, (await complete({ ...body, seed: 12 })).choice!.token_ids, "another seed draws other tokens");
  }
});

test("temperature 0.0001, 1e-5 and 1e-6 give greedy's tokens on every seed (they gave token 0)", async () => {
  const ask = (extra: Record<string, unknown>) => complete({ prompt: "In the beginning", max_tokens: 8, ignore_eos: true, ...extra });
  const greedy = (await ask({ temperature: 0 })).choice!.token_ids;
  for (const temperature of [1e-4, 1e-5, 1e-6]) {
    for (const seed of [0, 1, 2]) {
      const { status, text, choice } = await ask({ temperature, seed });
      assert.is(status, 200, text);
      assert.equal(choice!.token_ids, greedy, `temperature ${temperature}, seed ${seed}`);
    }
  }
});

/** How far a log-prob may move between two batch compositions of the same position (see its use). */
const BATCH_NOISE = 1e-4;

test("a sampled token's log-prob and top-k, from its logits row, are what echo scores at that position (the addon's double-precision log-softmax)", async () => {
  const prompt = Array.from({ length: 12 }, (_, i) => longPrompt[i]);
  const sampled = await complete({ prompt, max_tokens: 6, temperature: 1.2, seed: 9, logprobs: 3, ignore_eos: true });
  assert.is(sampled.status, 200, sampled.text);
  const generated = sampled.choice!.logprobs!;
  const echoed = (await complete({ prompt: [...prompt, ...generated.token_ids], max_tokens: 0, echo: true, logprobs: 3 })).choice!.logprobs!;
  for (const [i, logprob] of generated.token_logprobs.entries()) {
    const at = prompt.length + i;
    assert.equal(generated.top_token_ids[i], echoed.top_token_ids[at], `token ${i}: the same top-3`);
    // Float32 logits move in their last digits with a batch's composition (a decode of one token against the echo's prompt
    // batch): up to 1.7e-5 measured over seeds 9-12 under zen4, haswell, sandybridge and piledriver (0 under x64). A row read
    // at the wrong position is off by whole nats.
    assert.ok(Math.abs(logprob! - echoed.token_logprobs[at]!) <= BATCH_NOISE, `token ${i}: ${logprob} sampled, ${echoed.token_logprobs[at]} echoed`);
    for (const [j, value] of generated.top_token_logprobs[i]!.entries()) assert.ok(Math.abs(value - echoed.top_token_logprobs[at]![j]) <= BATCH_NOISE, `token ${i}, top ${j}: ${value} sampled, ${echoed.top_token_logprobs[at]![j]} echoed`);
  }
});

test("seeds: 2^32 + 5 draws apart from 5 (they wrapped), each repeats itself; past 2^53 - 1 the seed is refused with a 400 naming it", async () => {
  const ask = (seed: number) => complete({ prompt: "In the beginning", max_tokens: 16, temperature: 1.5, ignore_eos: true, seed });
  const five = (await ask(5)).choice!.token_ids;
  const wide = (await ask(2 ** 32 + 5)).choice!.token_ids;
  assert.not.equal(wide, five);
  assert.equal((await ask(2 ** 32 + 5)).choice!.token_ids, wide);
  assert.equal((await ask(5)).choice!.token_ids, five);
  assert.is((await ask(Number.MAX_SAFE_INTEGER)).status, 200);
  for (const seed of [2 ** 53, 1e20, -1, 1.5]) {
    const refused = await complete({ prompt: "In the beginning", max_tokens: 4, seed });
    assert.is(refused.status, 400, `seed ${seed}`);
    const error = (JSON.parse(refused.text) as { error: { message: string; param: string } }).error;
    assert.equal([error.param, error.message], ["seed", "seed must be an integer from 0 to 9007199254740991 (2^53 - 1)"]);
  }
});

test.run();
