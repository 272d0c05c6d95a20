import { fail, pass, postJson, readEvents, streamedChatLogprobs, streamedText, type CheckResult, type Choice, type ConformanceGroup, type ConformanceTarget } from "../target.js";

/** OpenAI's documented semantics that real clients (lm-evaluation-harness, the openai SDKs) rely on. */
export const OPENAI_SEMANTICS_CHECKS: ConformanceGroup = {
  stop_in_stream: stopInStream,
  many_stop_strings: manyStopStrings,
  echo_logprobs: echoLogprobs,
  batched_prompts: batchedPrompts,
  max_completion_tokens: maxCompletionTokens,
  chat_logprobs: chatLogprobs,
};

/**
 * A stop string never reaches a client, streaming or not, even when it spans tokens: the stream
 * must carry exactly the non-streamed text. The stop string is two characters of the greedy
 * output, so on a character-level vocabulary it spans two tokens (two chunks).
 */
async function stopInStream(target: ConformanceTarget): Promise<CheckResult> {
  const base = { prompt: "Once upon a time", max_tokens: 10, temperature: 0 };
  const free = (await postJson(target, "/v1/completions", base)).json.choices?.[0]?.text ?? "";
  if (free.length < 5) return { status: "skip", detail: `greedy output ${JSON.stringify(free)} is too short to place a stop string in` };
  const stop = free.slice(3, 5);
  const expected = free.slice(0, free.indexOf(stop));
  const problems: string[] = [];
  for (const [path, body] of [
    ["/v1/completions", { ...base, stop: [stop] }],
    ["/v1/chat/completions", { messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 10, temperature: 0 }],
  ] as const) {
    let reference = expected;
    let request: Record<string, unknown> = body;
    if (path === "/v1/chat/completions") {
      const chatFree = (await postJson(target, path, body)).json.choices?.[0]?.message?.content ?? "";
      if (chatFree.length < 5) continue;
      const chatStop = chatFree.slice(3, 5);
      reference = chatFree.slice(0, chatFree.indexOf(chatStop));
      request = { ...body, stop: [chatStop] };
    }
    const plain = await postJson(target, path, request);
    const plainText = plain.json.choices?.[0]?.text ?? plain.json.choices?.[0]?.message?.content;
    const streamed = await streamedText(target, path, request);
    if (plainText !== reference) problems.push(`${path}: non-streamed ${JSON.stringify(plainText)}, expected ${JSON.stringify(reference)}`);
    if (streamed !== reference) problems.push(`${path}: streamed ${JSON.stringify(streamed)}, expected ${JSON.stringify(reference)} (stop ${JSON.stringify(request.stop)})`);
  }
  return problems.length === 0 ? pass(`stop ${JSON.stringify(stop)} (two tokens): streamed text equals the non-streamed ${JSON.stringify(expected)}, completions and chat`) : fail(problems.join("; "));
}

/**
 * Stop strings beyond OpenAI's 4: lm-eval's generate_until sends every `until` string plus the EOS
 * text (5 for a task with 4), and llama-server takes any number. Eight stop strings, the two that
 * occur in the greedy output last, must give 200, finish_reason "stop" and the text cut at the
 * earlier of the two, so a server that reads only the first few, or only the first match, fails.
 */
const MANY_STOP_STRINGS = 8;

async function manyStopStrings(target: ConformanceTarget): Promise<CheckResult> {
  const base = { prompt: "Once upon a time", max_tokens: 10, temperature: 0 };
  const free = (await postJson(target, "/v1/completions", base)).json.choices?.[0]?.text ?? "";
  if (free.length < 6) return { status: "skip", detail: `greedy output ${JSON.stringify(free)} is too short to place two stop strings in` };
  const early = free.slice(2, 3);
  const late = free.slice(free.length - 1);
  const decoys = Array.from({ length: MANY_STOP_STRINGS - 2 }, (_, i) => `\u0007stop${i}\u0007`);
  const stop = [...decoys, late, early];
  const expected = free.slice(0, Math.min(free.indexOf(early), free.indexOf(late)));
  const { status, json } = await postJson(target, "/v1/completions", { ...base, stop });
  if (status !== 200) return fail(`${stop.length} stop strings: status ${status} ${JSON.stringify(json).slice(0, 160)} (lm-eval's generate_until sends its until strings plus the EOS text)`);
  const choice = json.choices?.[0];
  if (choice?.finish_reason !== "stop" || choice.text !== expected) {
    return fail(`${stop.length} stop strings, ${JSON.stringify(early)} and ${JSON.stringify(late)} last: finish_reason ${choice?.finish_reason}, text ${JSON.stringify(choice?.text)}, expected ${JSON.stringify(expected)}`);
  }
  return pass(`${stop.length} stop strings accepted; cut at the earliest match (text ${JSON.stringify(expected)})`);
}

/**
 * lm-evaluation-harness's loglikelihood request: echo + logprobs over the prompt. OpenAI's
 * semantics: token_logprobs[i] is token i's own log-prob at every position (null only at the
 * first), top_logprobs[i] holds the top-N, tokens concatenate to the echoed text and text_offset
 * says where each starts.
 */
async function echoLogprobs(target: ConformanceTarget): Promise<CheckResult> {
  const prompt = "The cat sat on the mat";
  const { status, json } = await postJson(target, "/v1/completions", { prompt, max_tokens: 0, echo: true, logprobs: 1, temperature: 0 });
  const choice = json.choices?.[0] as (Choice & { logprobs?: { tokens?: string[]; token_logprobs?: (number | null)[]; top_logprobs?: (Record<string, number> | null)[]; text_offset?: number[] } }) | undefined;
  const lp = choice?.logprobs;
  if (status !== 200 || lp?.tokens === undefined || lp.token_logprobs === undefined || lp.top_logprobs === undefined || lp.text_offset === undefined) {
    return fail(`echo + logprobs + max_tokens 0: status ${status}, logprobs ${JSON.stringify(lp ?? null).slice(0, 120)}`);
  }
  const n = lp.tokens.length;
  if ([lp.token_logprobs.length, lp.top_logprobs.length, lp.text_offset.length].some((length) => length !== n)) return fail("tokens, token_logprobs, top_logprobs and text_offset differ in length");
  const missing = lp.token_logprobs.slice(1).filter((v) => typeof v !== "number" || !Number.isFinite(v) || v > 0).length;
  if (missing > 0) return fail(`${missing} of ${n - 1} echoed positions after the first have no finite log-prob of their own token`);
  const text = choice!.text ?? "";
  if (!text.startsWith(prompt) && !text.endsWith(prompt)) return fail(`echoed text ${JSON.stringify(text)} does not hold the prompt`);
  const offsetsAgree = lp.tokens.every((token, i) => text.slice(lp.text_offset![i], lp.text_offset![i] + token.length) === token);
  if (!offsetsAgree || lp.tokens.join("") !== text) return fail(`tokens ${JSON.stringify(lp.tokens.slice(0, 8))}… and text_offset do not spell the text ${JSON.stringify(text)}`);
  const aboveTop = lp.token_logprobs.findIndex((v, i) => i > 0 && lp.top_logprobs![i] !== null && v! > Math.max(...Object.values(lp.top_logprobs![i]!)) + 1e-4);
  if (aboveTop >= 0) return fail(`position ${aboveTop}: the token's log-prob exceeds its top-1`);
  const sum = (lp.token_logprobs.slice(1) as number[]).reduce((a, b) => a + b, 0);
  return pass(`${n} echoed tokens, each after the first with its own log-prob (sum ${sum.toFixed(2)} nats); tokens and text_offset spell the text`);
}

/** A list of prompts (strings, or token lists as lm-eval sends) gets one choice per prompt, each with its `index`, equal to that prompt alone. */
async function batchedPrompts(target: ConformanceTarget): Promise<CheckResult> {
  const texts = ["Hello there", "The sky is", "One two three"];
  const single = await Promise.all(texts.map(async (prompt) => (await postJson(target, "/v1/completions", { prompt, max_tokens: 4, temperature: 0 })).json.choices?.[0]?.text));
  const batch = await postJson(target, "/v1/completions", { prompt: texts, max_tokens: 4, temperature: 0 });
  const choices = batch.json.choices ?? [];
  if (batch.status !== 200 || choices.length !== texts.length) return fail(`${texts.length} string prompts: status ${batch.status}, ${choices.length} choices`);
  const byIndex = new Map(choices.map((c) => [c.index, c.text]));
  const wrong = texts.filter((_, i) => byIndex.get(i) !== single[i]);
  if (wrong.length > 0) return fail(`batched choices differ from the prompts alone: ${wrong.map((t) => JSON.stringify(t)).join(", ")}`);
  const ids = [[10, 11, 12, 13], [20, 21, 22]];
  const tokenBatch = await postJson(target, "/v1/completions", { prompt: ids, max_tokens: 2, temperature: 0 });
  const tokenChoices = tokenBatch.json.choices ?? [];
  if (tokenBatch.status !== 200 || tokenChoices.length !== 2 || tokenChoices.map((c) => c.index).sort().join() !== "0,1") {
    return fail(`a list of 2 token lists: status ${tokenBatch.status}, ${tokenChoices.length} choices`);
  }
  return pass(`${texts.length} string prompts → ${choices.length} choices by index, each equal to its prompt alone; 2 token lists → 2 choices`);
}

/** The chat API's current limit, `max_completion_tokens`, is honoured (the deprecated `max_tokens` is its alias). */
async function maxCompletionTokens(target: ConformanceTarget): Promise<CheckResult> {
  const limit = 3;
  const { status, json } = await postJson(target, "/v1/chat/completions", { messages: [{ role: "user", content: "Tell me a long story" }], max_completion_tokens: limit, temperature: 0 });
  const used = json.usage?.completion_tokens;
  const reason = json.choices?.[0]?.finish_reason;
  if (status !== 200 || used === undefined) return fail(`status ${status}, usage ${JSON.stringify(json.usage ?? null)}`);
  if (used > limit) return fail(`max_completion_tokens ${limit}: ${used} tokens generated`);
  if (used < limit && reason === "stop") return { status: "skip", detail: `the model stopped by itself after ${used} tokens: the limit was not reached` };
  return reason === "length" ? pass(`max_completion_tokens ${limit}: ${used} tokens, finish_reason "length"`) : fail(`${used} tokens at the limit but finish_reason ${reason}`);
}

/** Chat `logprobs: true` + `top_logprobs: N`: one content entry per generated token, each with N alternatives, streamed or not. */
async function chatLogprobs(target: ConformanceTarget): Promise<CheckResult> {
  const body = { messages: [{ role: "user", content: "Hi" }], max_tokens: 3, temperature: 0, logprobs: true, top_logprobs: 2 };
  const { status, json } = await postJson(target, "/v1/chat/completions", body);
  type Entry = { token?: unknown; logprob?: unknown; top_logprobs?: unknown[] };
  const content = (json.choices?.[0] as { logprobs?: { content?: Entry[] } } | undefined)?.logprobs?.content;
  const used = json.usage?.completion_tokens;
  if (status !== 200 || content === undefined || used === undefined) return fail(`status ${status}: no choices[0].logprobs.content`);
  const good = (e: Entry) => typeof e.token === "string" && typeof e.logprob === "number" && e.logprob <= 0 && e.top_logprobs?.length === 2;
  if (content.length !== used || !content.every(good)) return fail(`${content.length} entries for ${used} tokens; first ${JSON.stringify(content[0] ?? null).slice(0, 120)}`);
  const { events } = await readEvents(target, "/v1/chat/completions", { model: target.model, ...body, stream: true });
  const streamedEntries = streamedChatLogprobs<Entry>(events.filter((e) => e !== "data: [DONE]"));
  if (streamedEntries.length !== used) return fail(`streamed: ${streamedEntries.length} log-prob entries for ${used} tokens`);
  return pass(`${used} tokens, each with its log-prob and 2 alternatives, streamed and not`);
}
