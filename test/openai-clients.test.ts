// test-tier: fast

/**
 * Our server spoken to in the exact request shapes of the clients people point at it:
 * lm-evaluation-harness's `local-completions` (loglikelihood and generate_until) and the official
 * openai clients (chat and legacy completions, streaming and not). Each test would have failed
 * before the server learned that shape (issue: batched prompts, echo log-probs, stop strings in
 * streams, max_completion_tokens, chat logprobs, developer role and content parts, promtool).
 */
import { spawnSync } from "node:child_process";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { resolveModel } from "../harness/fixtures/registry.js";
import { lintPrometheusText } from "../harness/conformance/prometheus-lint.js";
import { httpCall } from "../harness/sut/http-call.js";
import { startManagedServer, stopManagedServer, type ManagedServer } from "../harness/sut/managed-server.js";
import { scanStops } from "../server/stop-strings.js";

let server: ManagedServer;
test.before(async () => {
  const model = await resolveModel("tiny-random:F32");
  server = await startManagedServer({ modelPath: model.path, slots: 4, queue: 8, contextSize: 256, threads: 1, flashAttention: false, kvCacheType: "F32", bootTimeoutS: 120 });
});
test.after(async () => { await stopManagedServer(server); });

interface LegacyLogprobs { tokens: string[]; token_logprobs: (number | null)[]; top_logprobs: (Record<string, number> | null)[]; text_offset: number[]; token_ids: number[] }
interface CompletionChoice { index: number; text: string; finish_reason: string; logprobs: LegacyLogprobs | null }

async function post(path: string, body: Record<string, unknown>): Promise<{ status: number; json: any }> { // any: response bodies are checked field by field below
  const response = await httpCall(`${server.baseUrl}${path}`, { body });
  return { status: response.status, json: JSON.parse(response.text) };
}

/** The SSE data payloads of a streamed request, in order (the [DONE] sentinel kept as a string). */
async function stream(path: string, body: Record<string, unknown>): Promise<(any | "[DONE]")[]> { // any: as post
  const response = await httpCall(`${server.baseUrl}${path}`, { body: { ...body, stream: true } });
  assert.is(response.status, 200);
  return response.text.split("\n\n").filter((e) => e !== "").map((e) => {
    assert.ok(e.startsWith("data: "), e);
    return e === "data: [DONE]" ? "[DONE]" : JSON.parse(e.slice(6));
  });
}

async function tokenize(text: string): Promise<number[]> {
  return (await post("/tokenize", { content: text, add_special: true })).json.tokens as number[];
}

/** lm-eval's parse_logprobs: the continuation's summed log-prob and whether it is the greedy one. */
function lmEvalLoglikelihood(choice: CompletionChoice, ctxlen: number): [number, boolean] {
  const lp = choice.logprobs!;
  const continuation = lp.token_logprobs.slice(ctxlen, -1) as number[];
  const tops = lp.top_logprobs.slice(ctxlen, -1);
  const isGreedy = continuation.every((logprob, i) => logprob === Math.max(...Object.values(tops[i]!)));
  return [continuation.reduce((a, b) => a + b, 0), isGreedy];
}

test("lm-eval loglikelihood: a batch of token lists, echo, logprobs 1, max_tokens 1 — every position's own log-prob, greedy detected", async () => {
  const context = await tokenize("The cat sat");
  // The greedy continuation of the context, and one that is not.
  const greedy = (await post("/v1/completions", { prompt: context, max_tokens: 3, temperature: 0 })).json.choices[0].token_ids as number[];
  const other = greedy.map((id) => (id === 300 ? 301 : 300));
  // lm-eval sends [context + continuation] token lists and drops the one generated token with [ctxlen:-1].
  const { status, json } = await post("/v1/completions", { model: "m", prompt: [[...context, ...greedy], [...context, ...other]], temperature: 0, max_tokens: 1, logprobs: 1, seed: 1234, echo: true });
  assert.is(status, 200);
  const choices = (json.choices as CompletionChoice[]).sort((a, b) => a.index - b.index);
  assert.equal(choices.map((c) => c.index), [0, 1]);
  for (const choice of choices) {
    const lp = choice.logprobs!;
    assert.is(lp.token_logprobs.length, context.length + greedy.length + 1);
    assert.is(lp.token_logprobs[0], null);
    assert.ok(lp.token_logprobs.slice(1).every((v) => typeof v === "number" && v <= 0 && Number.isFinite(v)), JSON.stringify(lp.token_logprobs));
    assert.is(lp.tokens.join(""), choice.text);
    assert.ok(lp.tokens.every((t, i) => choice.text.slice(lp.text_offset[i]).startsWith(t)));
  }
  const [greedyLogprob, greedyIsGreedy] = lmEvalLoglikelihood(choices[0], context.length);
  const [otherLogprob, otherIsGreedy] = lmEvalLoglikelihood(choices[1], context.length);
  assert.ok(greedyIsGreedy, "the greedy continuation is not reported greedy");
  assert.not.ok(otherIsGreedy);
  assert.ok(greedyLogprob > otherLogprob, `${greedyLogprob} vs ${otherLogprob}`);
  // The same request alone gives the same numbers: batching does not change a prompt's log-probs
  // (each prompt is scored in a sequence of its own). The generated token's may move in the last
  // digits: its prefill shared a batch, and llama.cpp's last layer then ran on two rows, not one.
  const alone = (await post("/v1/completions", { prompt: [...context, ...other], temperature: 0, max_tokens: 1, logprobs: 1, echo: true })).json.choices[0] as CompletionChoice;
  assert.equal(alone.logprobs!.token_logprobs.slice(0, -1), choices[1].logprobs!.token_logprobs.slice(0, -1));
  assert.ok(Math.abs(alone.logprobs!.token_logprobs.at(-1)! - choices[1].logprobs!.token_logprobs.at(-1)!) < 1e-5);
});

test("lm-eval loglikelihood with max_tokens 0 (echo only): one log-prob per prompt token, null only at the first", async () => {
  const ids = await tokenize("Roses are red");
  const { status, json } = await post("/v1/completions", { prompt: [ids], echo: true, logprobs: 1, max_tokens: 0, temperature: 0 });
  assert.is(status, 200);
  const lp = (json.choices[0] as CompletionChoice).logprobs!;
  assert.is(lp.token_logprobs.length, ids.length);
  assert.is(lp.token_logprobs.filter((v) => v === null).length, 1);
  assert.equal(lp.token_ids, ids);
  assert.ok((json.choices[0].text as string).endsWith("Roses are red"), json.choices[0].text);
  assert.is(lp.tokens.join(""), json.choices[0].text);
});

test("greedy with log-probs: plain greedy's tokens, each one's log-prob its top-1's, its top-k what echo scores at that position (4 requests at once, batched)", async () => {
  const prompts = await Promise.all(["The model runs", "Roses are red", "Once upon a", "Hello"].map(tokenize));
  const ask = (prompt: number[], extra: Record<string, unknown>) => post("/v1/completions", { prompt: [prompt], max_tokens: 10, temperature: 0, ignore_eos: true, ...extra });
  const [plain, ranked] = await Promise.all([Promise.all(prompts.map((p) => ask(p, {}))), Promise.all(prompts.map((p) => ask(p, { logprobs: 5 })))]);
  for (const [n, prompt] of prompts.entries()) {
    const lp = (ranked[n].json.choices[0] as CompletionChoice).logprobs!;
    assert.equal(lp.token_ids, plain[n].json.choices[0].token_ids, "the same greedy tokens with and without log-probs");
    const echoed = (await post("/v1/completions", { prompt: [[...prompt, ...lp.token_ids]], echo: true, logprobs: 5, max_tokens: 0, temperature: 0 })).json.choices[0] as CompletionChoice;
    for (const [i, logprob] of lp.token_logprobs.entries()) {
      const top = lp.top_logprobs[i]!;
      assert.is(logprob, Math.max(...Object.values(top)), `token ${i}: greedy's token is its top-1`);
      const scored = echoed.logprobs!.top_logprobs[prompt.length + i]!;
      assert.equal(Object.keys(top), Object.keys(scored), `token ${i}: the same top-5 as echo scores`);
      // Float32 logits move in their last digits with a batch's composition: within 1e-5 of the value.
      for (const [text, value] of Object.entries(top)) assert.ok(Math.abs(value - scored[text]!) <= 1e-5 * Math.max(1, Math.abs(value)), `token ${i} "${text}": ${value} vs echo ${scored[text]}`);
    }
  }
});

test("greedy with log-probs reuses a shared prefix from the prompt cache, and answers as a cold slot: the same tokens, the same top-5", async () => {
  const prompt = await tokenize("The river runs past the old mill");
  const longer = [...prompt, ...await tokenize(" and the bridge")];
  const ask = (ids: number[], extra: Record<string, unknown>) => post("/v1/completions", { prompt: [ids], max_tokens: 8, temperature: 0, ignore_eos: true, logprobs: 5, ...extra });
  await ask(prompt, {});
  const reused = (await ask(longer, {})).json;
  const cold = (await ask(longer, { cache_prompt: false })).json;
  assert.ok(reused.usage.prompt_tokens_details.cached_tokens >= prompt.length - 1, JSON.stringify(reused.usage));
  assert.is(cold.usage.prompt_tokens_details.cached_tokens, 0);
  const [warm, fresh] = [reused.choices[0] as CompletionChoice, cold.choices[0] as CompletionChoice];
  assert.equal(warm.logprobs!.token_ids, fresh.logprobs!.token_ids);
  for (const [i, top] of warm.logprobs!.top_logprobs.entries()) {
    const coldTop = fresh.logprobs!.top_logprobs[i]!;
    assert.equal(Object.keys(top!), Object.keys(coldTop), `token ${i}: the same top-5`);
    for (const [text, value] of Object.entries(top!)) assert.ok(Math.abs(value - coldTop[text]!) <= 1e-5 * Math.max(1, Math.abs(value)), `token ${i} "${text}": ${value} reused vs ${coldTop[text]} cold`);
  }
});

test("lm-eval generate_until: a batch of string prompts with 4 until strings plus the EOS text (5 stops) — one choice per prompt, stop text cut", async () => {
  const prompts = ["Once upon a time", "The sky is", "Hello"];
  const free = await Promise.all(prompts.map(async (prompt) => (await post("/v1/completions", { prompt, max_tokens: 12, temperature: 0 })).json.choices[0].text as string));
  const stop = free[0].slice(4, 6);
  // lm-eval appends the tokenizer's EOS text to a task's `until` list: 4 until strings become 5 stops.
  const until = ["\n\n", "Question:", "Answer:", stop];
  const { status, json } = await post("/v1/completions", { model: "m", prompt: prompts, max_tokens: 12, temperature: 0, stop: [...until, "</s>"], seed: 1234 });
  assert.is(status, 200);
  const texts = (json.choices as CompletionChoice[]).sort((a, b) => a.index - b.index).map((c) => c.text);
  assert.equal(texts, free.map((text) => (text.includes(stop) ? text.slice(0, text.indexOf(stop)) : text)));
  assert.is(json.usage.prompt_tokens, (await Promise.all(prompts.map(tokenize))).reduce((sum, ids) => sum + ids.length, 0));
});

test("a stop string that spans chunks never reaches a stream; held-back text that was not a stop is sent at the end", async () => {
  const free = (await post("/v1/completions", { prompt: "Once upon a time", max_tokens: 10, temperature: 0 })).json.choices[0].text as string;
  const spanning = free.slice(3, 5);
  const events = await stream("/v1/completions", { prompt: "Once upon a time", max_tokens: 10, temperature: 0, stop: [spanning] });
  const streamed = events.filter((e) => e !== "[DONE]").map((e) => e.choices[0]?.text ?? "").join("");
  assert.is(streamed, free.slice(0, free.indexOf(spanning)));
  // A stop that starts like the output but never completes: its prefix is held, then released.
  const neverCompletes = `${free.slice(8, 9)}\u0007`;
  const released = await stream("/v1/completions", { prompt: "Once upon a time", max_tokens: 10, temperature: 0, stop: [neverCompletes] });
  assert.is(released.filter((e) => e !== "[DONE]").map((e) => e.choices[0]?.text ?? "").join(""), free);
});

test("openai client chat, not streaming: developer role, content parts, max_completion_tokens, logprobs + top_logprobs", async () => {
  const { status, json } = await post("/v1/chat/completions", {
    model: "m", messages: [{ role: "developer", content: "Be brief" }, { role: "user", content: [{ type: "text", text: "Say" }, { type: "text", text: "hi" }] }],
    max_completion_tokens: 4, logprobs: true, top_logprobs: 3, temperature: 0,
  });
  assert.is(status, 200, JSON.stringify(json));
  assert.is(json.usage.completion_tokens, 4);
  assert.is(json.choices[0].finish_reason, "length");
  const content = json.choices[0].logprobs.content as { token: string; logprob: number; bytes: number[]; top_logprobs: { token: string; logprob: number }[] }[];
  assert.is(content.length, 4);
  assert.is(content.map((c) => c.token).join(""), json.choices[0].message.content);
  for (const entry of content) {
    assert.is(entry.top_logprobs.length, 3);
    assert.ok(entry.logprob <= entry.top_logprobs[0].logprob + 1e-9);
    assert.equal(entry.bytes, [...Buffer.from(entry.token)]);
  }
  // max_tokens 0 and an image part are refused, as completions refuses max_tokens 0.
  assert.is((await post("/v1/chat/completions", { messages: [{ role: "user", content: "x" }], max_tokens: 0 })).status, 400);
  assert.is((await post("/v1/chat/completions", { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] })).status, 400);
});

test("openai client chat, streaming with include_usage: role chunk, content, stop cut across chunks, finish chunk, usage chunk, [DONE]", async () => {
  const messages = [{ role: "system", content: "You are terse" }, { role: "user", content: "Once upon a time" }];
  const free = (await post("/v1/chat/completions", { messages, max_completion_tokens: 10, temperature: 0 })).json.choices[0].message.content as string;
  const stop = free.slice(2, 4);
  const events = await stream("/v1/chat/completions", { messages, max_completion_tokens: 10, temperature: 0, stop, stream_options: { include_usage: true }, logprobs: true });
  assert.is(events.at(-1), "[DONE]");
  const chunks = events.slice(0, -1);
  assert.equal(chunks[0].choices[0].delta, { role: "assistant" });
  const usage = chunks.at(-1);
  assert.equal(usage.choices, []);
  const finish = chunks.at(-2);
  assert.is(finish.choices[0].finish_reason, "stop");
  const text = chunks.slice(1, -1).map((c: any) => c.choices[0].delta.content ?? "").join(""); // any: chunk bodies
  assert.is(text, free.slice(0, free.indexOf(stop)));
  assert.is(usage.usage.completion_tokens, chunks.slice(1, -2).length);
  assert.ok(chunks.slice(1, -2).every((c: any) => c.choices[0].logprobs.content.length === 1)); // any: chunk bodies
});

test("/metrics passes promtool's naming rules (and promtool itself where installed)", async () => {
  const text = (await httpCall(`${server.baseUrl}/metrics`)).text;
  assert.equal(lintPrometheusText(text), []);
  assert.equal(lintPrometheusText("# HELP bench_slots_total Slots\n# TYPE bench_slots_total gauge\nbench_slots_total 4\n"), ['bench_slots_total: non-counter metrics should not have "_total" suffix']);
  assert.equal(lintPrometheusText("# TYPE requests counter\nrequests 1\n"), ["requests: no help text", 'requests: counter metrics should have "_total" suffix']);
  const promtool = spawnSync("promtool", ["check", "metrics"], { input: text, encoding: "utf8" });
  if (promtool.error === undefined) assert.is(promtool.status, 0, `${promtool.stdout}${promtool.stderr}`);
});

test("scanStops holds back exactly the suffix that could still become a stop string", () => {
  assert.equal(scanStops("abc", ["cd"]), { stopAt: undefined, safeEnd: 2 });
  assert.equal(scanStops("abcd", ["cd"]), { stopAt: 2, safeEnd: 2 });
  assert.equal(scanStops("abc", ["xy"]), { stopAt: undefined, safeEnd: 3 });
  assert.equal(scanStops("aXYZ", ["XYZW", "Z"]), { stopAt: 3, safeEnd: 3 });
  assert.equal(scanStops("aXY", ["XYZW"]), { stopAt: undefined, safeEnd: 1 });
});

test.run();
