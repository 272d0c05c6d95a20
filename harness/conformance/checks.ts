import { setTimeout as sleep } from "node:timers/promises";
import { request } from "undici";
import { httpCall } from "../sut/http-call.js";
import { type ManagedServer } from "../sut/managed-server.js";
import { parsePrometheusText } from "./prometheus.js";
import { lintPrometheusText } from "./prometheus-lint.js";
import { DEFAULT_LOGPROB_TOLERANCE, describeTolerance, judgeGreedyToken, largestGap, logprobsAgree, rankedDescending, isTopTie, type LogprobTolerance, type ReportedToken } from "./greedy-logprobs.js";

/** What a conformance check gets: the server's base URL, the model id, and what the harness saw at boot. */
export interface ConformanceTarget {
  readonly baseUrl: string;
  readonly model: string;
  readonly apiKey?: string;
  /** The bounds the arm declares for the server (ours); absent for a server whose limits the harness does not know. */
  readonly slots?: number;
  readonly queue?: number;
  /** Prometheus series the server promises; none: any valid exposition with samples passes. */
  readonly expectMetrics: readonly string[];
  readonly managed?: ManagedServer;
  /** How far two reports of one log-prob may differ on this server (the arm's `logprob_tolerance`); absent: float32's default. */
  readonly logprobTolerance?: LogprobTolerance;
  /** Aborts every request a check has in flight: the check was given up on (per-case timeout) or its arm stopped. */
  readonly signal?: AbortSignal;
}

/**
 * Gauges of requests being served now, by server family: how the disconnect check sees a slot free
 * without knowing whose server it is. The counter of cancellations only ours exports.
 */
const IN_FLIGHT_GAUGES = ["bench_slots_active", "llamacpp:requests_processing", "vllm:num_requests_running"] as const;
const CANCELLED_COUNTER = "bench_requests_cancelled_total";
/** Concurrent requests against a server that declares no bounds: more than a small server's slots. */
const UNDECLARED_BURST = 8;

export type CheckResult = { readonly status: "pass" | "fail" | "skip"; readonly detail: string };

type Check = (target: ConformanceTarget) => Promise<CheckResult>;

const pass = (detail: string): CheckResult => ({ status: "pass", detail });
const fail = (detail: string): CheckResult => ({ status: "fail", detail });

async function post(target: ConformanceTarget, path: string, body: unknown) {
  return httpCall(`${target.baseUrl}${path}`, { body, apiKey: target.apiKey, signal: target.signal });
}

async function metrics(target: ConformanceTarget): Promise<Map<string, number>> {
  return parsePrometheusText((await httpCall(`${target.baseUrl}/metrics`, { signal: target.signal })).text);
}

/** Reads an SSE response, stamping each event; stops after `stopAfter` events when given (then drops the connection). */
async function readEvents(target: ConformanceTarget, path: string, body: unknown, stopAfter?: number): Promise<{ status: number; events: string[]; raw: string }> {
  const controller = new AbortController();
  const signal = target.signal === undefined ? controller.signal : AbortSignal.any([controller.signal, target.signal]);
  const response = await request(`${target.baseUrl}${path}`, {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal,
  });
  let raw = "";
  const events: string[] = [];
  try {
    for await (const chunk of response.body) {
      raw += (chunk as Buffer).toString();
      let cut: number;
      while ((cut = raw.indexOf("\n\n")) >= 0) {
        events.push(raw.slice(0, cut));
        raw = raw.slice(cut + 2);
      }
      if (stopAfter !== undefined && events.length >= stopAfter) {
        controller.abort();
        break;
      }
    }
  } catch (error) {
    if (stopAfter === undefined || target.signal?.aborted === true) throw error;
  }
  return { status: response.statusCode, events, raw };
}

const isCompletion = (text: string): boolean => {
  try {
    return typeof (JSON.parse(text) as { choices?: { text?: unknown }[] }).choices?.[0]?.text === "string";
  } catch {
    return false;
  }
};

const isErrorObject = (text: string): boolean => {
  try {
    const error = (JSON.parse(text) as { error?: { message?: unknown; type?: unknown } }).error;
    return typeof error?.message === "string" && typeof error.type === "string";
  } catch {
    return false;
  }
};

/** The conformance checks any OpenAI-compatible server can be held to, by name (suites list them). */
export const CONFORMANCE_CHECKS: Readonly<Record<string, Check>> = {
  async endpoints(target) {
    const paths = ["/v1/models", "/health", "/metrics"];
    const statuses = await Promise.all(paths.map(async (p) => (await httpCall(`${target.baseUrl}${p}`, { apiKey: target.apiKey, signal: target.signal })).status));
    const completion = await post(target, "/v1/completions", { model: target.model, prompt: "Hello", max_tokens: 2, temperature: 0 });
    const chat = await post(target, "/v1/chat/completions", { model: target.model, messages: [{ role: "user", content: "Hello" }], max_tokens: 2, temperature: 0 });
    const all = [...paths.map((p, i) => `${p} ${statuses[i]}`), `/v1/completions ${completion.status}`, `/v1/chat/completions ${chat.status}`];
    return [...statuses, completion.status, chat.status].every((s) => s === 200) ? pass(all.join(", ")) : fail(all.join(", "));
  },

  async sse_framing(target) {
    const { status, events, raw } = await readEvents(target, "/v1/chat/completions", { model: target.model, messages: [{ role: "user", content: "Hi" }], max_tokens: 4, stream: true, temperature: 0 });
    if (status !== 200) return fail(`status ${status}`);
    const bad = events.find((e) => !e.startsWith("data: "));
    if (bad !== undefined) return fail(`event without "data: ": ${JSON.stringify(bad.slice(0, 60))}`);
    if (events[events.length - 1] !== "data: [DONE]" || raw !== "") return fail("the stream does not end with data: [DONE]");
    const unparsable = events.slice(0, -1).find((e) => { try { JSON.parse(e.slice(6)); return false; } catch { return true; } });
    if (unparsable !== undefined) return fail(`an event is not JSON: ${unparsable.slice(0, 60)}`);
    const first = JSON.parse(events[0].slice(6)) as { choices: { delta: { role?: string; content?: string } }[] };
    return pass(`${events.length} events, each "data: <json>", ending with [DONE]; first chunk ${first.choices[0]?.delta.content === undefined ? "is role-only (a client must not clock TTFT on it)" : "carries content"}`);
  },

  async usage(target) {
    const plain = JSON.parse((await post(target, "/v1/completions", { model: target.model, prompt: "abc", max_tokens: 5, temperature: 0 })).text) as { usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } };
    const u = plain.usage;
    if (u === undefined || u.completion_tokens !== 5 || u.total_tokens !== u.prompt_tokens + u.completion_tokens) return fail(`usage ${JSON.stringify(u)}`);
    const { events } = await readEvents(target, "/v1/completions", { model: target.model, prompt: "abc", max_tokens: 5, temperature: 0, stream: true, stream_options: { include_usage: true } });
    const usageChunk = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)) as { usage?: { completion_tokens: number } }).find((e) => e.usage !== undefined);
    if (usageChunk?.usage?.completion_tokens !== 5) return fail("no streamed usage chunk with completion_tokens = 5 under stream_options.include_usage");
    return pass(`usage ${JSON.stringify(u)}; streamed usage chunk present`);
  },

  async finish_reason(target) {
    const first = JSON.parse((await post(target, "/v1/completions", { model: target.model, prompt: "Once upon a time", max_tokens: 6, temperature: 0 })).text) as { choices: { text: string; finish_reason: string }[] };
    const choice = first.choices[0];
    if (choice.finish_reason !== "length") return fail(`max_tokens reached but finish_reason is ${choice.finish_reason}`);
    const stop = choice.text.slice(2, 3);
    const stopped = JSON.parse((await post(target, "/v1/completions", { model: target.model, prompt: "Once upon a time", max_tokens: 6, temperature: 0, stop: [stop] })).text) as { choices: { text: string; finish_reason: string }[] };
    const s = stopped.choices[0];
    if (s.finish_reason !== "stop" || s.text.includes(stop)) return fail(`stop ${JSON.stringify(stop)}: finish_reason ${s.finish_reason}, text ${JSON.stringify(s.text)}`);
    return pass(`"length" at max_tokens; "stop" at stop string ${JSON.stringify(stop)} (text ${JSON.stringify(s.text)})`);
  },

  async overload_429(target) {
    const before = await metrics(target).catch(() => new Map<string, number>());
    const declared = target.queue !== undefined;
    const burst = declared ? (target.slots ?? 1) + target.queue! + 3 : UNDECLARED_BURST;
    const responses = await Promise.all(Array.from({ length: burst }, () => post(target, "/v1/completions", { model: target.model, prompt: "Load", max_tokens: 300, temperature: 0 })));
    const rejected = responses.filter((r) => r.status === 429);
    const served = responses.filter((r) => r.status === 200).length;
    const other = responses.filter((r) => r.status !== 200 && r.status !== 429);
    if (other.length > 0) return fail(`${burst} at once: ${other.length} answered neither 200 nor 429 (${[...new Set(other.map((r) => r.status))].join(", ")})`);
    if (!rejected.every((r) => isErrorObject(r.text))) return fail("a 429 without an OpenAI error object");
    // OpenAI's API allows a server to queue instead of refusing; only a server that declares a bounded queue promises 429 beyond it.
    if (rejected.length === 0 && declared) return fail(`${burst} concurrent requests against ${target.slots} slots + ${target.queue} queued: no 429`);
    if (rejected.length === 0) return pass(`${burst} at once: all ${served} served (the server queues instead of answering 429, as OpenAI's API allows)`);
    const after = await metrics(target).catch(() => new Map<string, number>());
    const counted = (after.get("bench_requests_rejected_total") ?? NaN) - (before.get("bench_requests_rejected_total") ?? NaN);
    return pass(`${burst} at once: ${served} served, ${rejected.length} answered 429 with an error object${Number.isFinite(counted) ? `; /metrics counted ${counted} rejections` : ""}`);
  },

  async booting_503(target) {
    const boot = target.managed?.bootObservations;
    if (boot === undefined) return { status: "skip", detail: "the harness did not start this server, so it could not watch it boot" };
    const booting = boot.find((o) => o.status === 503);
    const answeredWhileBooting = boot.filter((o) => o.status !== 0 && o.status !== 200);
    if (booting === undefined && answeredWhileBooting.length === 0) return { status: "skip", detail: `the server answered nothing before it was ready (${JSON.stringify(boot)}): it booted faster than it could be watched` };
    if (booting === undefined) return fail(`never saw 503 while booting: ${JSON.stringify(boot)}`);
    return pass(`/health during boot: ${boot.map((o) => `${o.status}${o.stage === undefined ? "" : ` (${o.stage})`}`).join(" → ")}`);
  },

  async disconnect_frees_slot(target) {
    const before = await metrics(target);
    const gauge = IN_FLIGHT_GAUGES.find((name) => before.has(name));
    if (gauge === undefined) return { status: "skip", detail: `/metrics has none of the in-flight gauges this check knows (${IN_FLIGHT_GAUGES.join(", ")}), so a freed slot cannot be seen` };
    const { events } = await readEvents(target, "/v1/completions", { model: target.model, prompt: "Disconnect", max_tokens: 1000, temperature: 0, stream: true }, 2);
    if (events.length < 2) return fail("the stream did not start");
    let after = await metrics(target);
    const deadline = Date.now() + 5000;
    while ((after.get(gauge) ?? 1) !== 0 && Date.now() < deadline) {
      await sleep(25);
      after = await metrics(target);
    }
    if (after.get(gauge) !== 0) return fail(`${gauge} is ${after.get(gauge)} 5 s after the client left`);
    const cancelled = (after.get(CANCELLED_COUNTER) ?? NaN) - (before.get(CANCELLED_COUNTER) ?? NaN);
    if (before.has(CANCELLED_COUNTER) && !(cancelled >= 1)) return fail(`${CANCELLED_COUNTER} rose by ${cancelled}`);
    const capacity = target.slots ?? 2;
    const answers = await Promise.all(Array.from({ length: capacity }, () => post(target, "/v1/completions", { model: target.model, prompt: "x", max_tokens: 2, temperature: 0 })));
    if (answers.some((r) => r.status !== 200)) return fail("full capacity was not available after the disconnect");
    return pass(`slot freed (${gauge} 0${Number.isFinite(cancelled) ? `, cancelled +${cancelled}` : ""}); ${capacity} concurrent requests then served`);
  },

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

  async bad_requests_400(target) {
    const cases: [string, { body?: unknown; raw?: string }][] = [
      ["malformed JSON", { raw: "{not json" }],
      ["prompt missing", { body: { model: target.model, max_tokens: 2 } }],
      // -1 is refused by ours and read as "no limit" by llama.cpp's server; OpenAI documents neither, so both are accepted (a 200 must still be a completion).
      ["max_tokens -1", { body: { model: target.model, prompt: "x", max_tokens: -1 } }],
      ["temperature 5", { body: { model: target.model, prompt: "x", temperature: 5 } }],
      ["stop of a number", { body: { model: target.model, prompt: "x", stop: 3 } }],
    ];
    const outcomes = await Promise.all(cases.map(async ([name, c]) => {
      const r = await httpCall(`${target.baseUrl}/v1/completions`, { method: "POST", body: c.body, rawBody: c.raw, apiKey: target.apiKey, signal: target.signal });
      const unlimited = name === "max_tokens -1" && r.status === 200 && isCompletion(r.text);
      return { name, ok: (r.status === 400 && isErrorObject(r.text)) || unlimited, status: r.status };
    }));
    const bad = outcomes.filter((o) => !o.ok);
    return bad.length === 0 ? pass(`${cases.length} malformed requests → 400 with an error object`) : fail(bad.map((o) => `${o.name}: ${o.status}`).join("; "));
  },

  async metrics_prometheus(target) {
    const samples = await metrics(target);
    if (samples.size === 0) return fail("/metrics holds no samples");
    const missing = target.expectMetrics.filter((name) => !samples.has(name));
    if (missing.length > 0) return fail(`missing ${missing.join(", ")}`);
    return pass(`${samples.size} samples parse as Prometheus text${target.expectMetrics.length > 0 ? `; all ${target.expectMetrics.length} series the arm expects present` : ""}`);
  },

  // OpenAI's documented semantics that real clients (lm-evaluation-harness, the openai SDKs) rely on.
  stop_in_stream: stopInStream,
  many_stop_strings: manyStopStrings,
  echo_logprobs: echoLogprobs,
  batched_prompts: batchedPrompts,
  max_completion_tokens: maxCompletionTokens,
  chat_logprobs: chatLogprobs,
  metrics_naming: metricsNaming,
  // What the log-probs of greedy tokens say, not only their shape (greedy-logprobs.ts).
  greedy_logprobs: greedyLogprobs,
  greedy_logprobs_echo: greedyLogprobsEcho,
};

type Choice = { index?: number; text?: string; finish_reason?: string | null; message?: { content?: string }; delta?: { content?: string }; logprobs?: unknown };
type Completion = { choices?: Choice[]; usage?: { completion_tokens?: number } };

async function postJson(target: ConformanceTarget, path: string, body: Record<string, unknown>): Promise<{ status: number; json: Completion & Record<string, unknown> }> {
  const response = await post(target, path, { model: target.model, ...body });
  try {
    return { status: response.status, json: JSON.parse(response.text) as Completion & Record<string, unknown> };
  } catch {
    return { status: response.status, json: {} };
  }
}

/** The streamed text of choice 0 (completions `text`, chat `delta.content`). */
async function streamedText(target: ConformanceTarget, path: string, body: Record<string, unknown>): Promise<string> {
  const { events } = await readEvents(target, path, { model: target.model, ...body, stream: true });
  return events.filter((e) => e !== "data: [DONE]").map((e) => JSON.parse(e.slice(6)) as Completion)
    .flatMap((e) => e.choices ?? []).filter((c) => (c.index ?? 0) === 0).map((c) => c.text ?? c.delta?.content ?? "").join("");
}

/** The log-prob entries a streamed chat answer's data events carry (`choices[].logprobs.content`), in order. */
function streamedChatLogprobs<T>(dataEvents: readonly string[]): T[] {
  return dataEvents.map((e) => JSON.parse(e.slice(6)) as { choices?: { logprobs?: { content?: T[] } | null }[] })
    .flatMap((e) => e.choices ?? []).flatMap((c) => c.logprobs?.content ?? []);
}

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

/** /metrics follows Prometheus's naming rules as `promtool check metrics` lints them. */
async function metricsNaming(target: ConformanceTarget): Promise<CheckResult> {
  const response = await httpCall(`${target.baseUrl}/metrics`, { signal: target.signal });
  if (response.status !== 200) return fail(`/metrics answered ${response.status}`);
  const problems = lintPrometheusText(response.text);
  return problems.length === 0 ? pass("every metric family has help text and promtool's naming (counters _total, gauges not, base units)") : fail(problems.join("; "));
}

/** Alternatives asked for per greedy token, and tokens generated per request, in the greedy log-prob checks. */
const GREEDY_TOP = 5;
const GREEDY_TOKENS = 12;

/**
 * Greedy requests sent at once, so that a step decodes several sequences and a server that ranks
 * another sequence's row is seen: four, or what a server declares it holds without a 429.
 */
function greedyConcurrency(target: ConformanceTarget): number {
  return target.slots === undefined ? 4 : Math.min(4, target.slots + (target.queue ?? 0));
}

type ChatEntry = { token?: unknown; logprob?: unknown; top_logprobs?: { token?: unknown; logprob?: unknown }[] };

/** A chat `logprobs.content` list as reports; undefined where an entry is not the documented shape. */
function chatReports(content: readonly ChatEntry[] | undefined): ReportedToken[] | undefined {
  if (content === undefined) return undefined;
  const reports = content.map((e) => (typeof e.token === "string" && typeof e.logprob === "number" && Array.isArray(e.top_logprobs)
    && e.top_logprobs.every((a) => typeof a.token === "string" && typeof a.logprob === "number")
    ? { token: e.token, logprob: e.logprob, top: e.top_logprobs as { token: string; logprob: number }[] } : undefined));
  return reports.every((r) => r !== undefined) ? reports as ReportedToken[] : undefined;
}

/** Every report judged greedy-consistent (with `topCount` alternatives each, where the shape keeps them all); problems prefixed with where they are. */
function judgeAll(label: string, reports: readonly ReportedToken[], topCount: number | undefined, tolerance: LogprobTolerance): { problems: string[]; decided: number } {
  const verdicts = reports.map((report) => judgeGreedyToken(report, topCount, tolerance));
  return {
    problems: verdicts.flatMap((v, i) => v.problems.map((p) => `${label} token ${i}: ${p}`)),
    decided: verdicts.filter((v) => v.decided).length,
  };
}

/** A greedy check's verdict from what it found, its detail ending with the tolerance it judged by and the largest gap it saw, so an arm can set its tolerance from evidence. */
function greedyVerdict(problems: readonly string[], skipped: string | undefined, passed: string, tolerance: LogprobTolerance, gaps: readonly (readonly [number, number])[]): CheckResult {
  const evidence = `; ${describeTolerance(tolerance)}, largest gap ${largestGap(gaps).toExponential(1)} nats`;
  if (problems.length > 0) return fail(problems.slice(0, 4).join("; ") + (problems.length > 4 ? `; and ${problems.length - 4} more` : "") + evidence);
  if (skipped !== undefined) return { status: "skip", detail: skipped + evidence };
  return pass(passed + evidence);
}

/**
 * Chat greedy tokens with `logprobs` + `top_logprobs`, several prompts at once, streamed and not:
 * each token is its own top-1 with its top-1's log-prob, each top list sorted with a mass ≤ 1, and
 * the streamed tokens and log-probs are the non-streamed ones. SKIPPED when every position is a tie.
 */
async function greedyLogprobs(target: ConformanceTarget): Promise<CheckResult> {
  const tolerance = target.logprobTolerance ?? DEFAULT_LOGPROB_TOLERANCE;
  const prompts = ["Tell me about rivers", "Count to ten", "What is the weather", "Name three colours"].slice(0, greedyConcurrency(target));
  const body = (content: string) => ({ messages: [{ role: "user", content }], max_tokens: GREEDY_TOKENS, temperature: 0, logprobs: true, top_logprobs: GREEDY_TOP });
  const plain = await Promise.all(prompts.map((p) => postJson(target, "/v1/chat/completions", body(p))));
  const streamed = await Promise.all(prompts.map(async (p) => {
    const { status, events } = await readEvents(target, "/v1/chat/completions", { model: target.model, ...body(p), stream: true });
    const entries = streamedChatLogprobs<ChatEntry>(events.filter((e) => e.startsWith("data: {")));
    return { status, reports: chatReports(entries) };
  }));
  const problems: string[] = [];
  let decided = 0;
  let tokens = 0;
  const gaps: [number, number][] = [];
  for (const [n, prompt] of prompts.entries()) {
    const label = JSON.stringify(prompt);
    const { status, json } = plain[n];
    const reports = chatReports((json.choices?.[0] as { logprobs?: { content?: ChatEntry[] } } | undefined)?.logprobs?.content);
    if (status !== 200 || reports === undefined || reports.length !== json.usage?.completion_tokens) {
      problems.push(`${label}: status ${status}, ${reports?.length ?? "no"} log-prob entries in the documented shape for ${json.usage?.completion_tokens} tokens`);
      continue;
    }
    const judged = judgeAll(label, reports, GREEDY_TOP, tolerance);
    problems.push(...judged.problems);
    decided += judged.decided;
    tokens += reports.length;
    const stream = streamed[n];
    if (stream.status !== 200 || stream.reports === undefined) {
      problems.push(`${label} streamed: status ${stream.status}, log-prob entries not in the documented shape`);
      continue;
    }
    problems.push(...judgeAll(`${label} streamed`, stream.reports, GREEDY_TOP, tolerance).problems);
    if (stream.reports.map((r) => r.token).join("\u0000") !== reports.map((r) => r.token).join("\u0000")) {
      problems.push(`${label}: streamed tokens ${JSON.stringify(stream.reports.map((r) => r.token).join(""))}, not streamed ${JSON.stringify(reports.map((r) => r.token).join(""))}`);
      continue;
    }
    reports.forEach((r, i) => {
      gaps.push([r.logprob, stream.reports![i].logprob]);
      if (!logprobsAgree(r.logprob, stream.reports![i].logprob, tolerance)) problems.push(`${label} token ${i}: log-prob ${r.logprob} not streamed, ${stream.reports![i].logprob} streamed`);
    });
  }
  return greedyVerdict(problems, decided === 0 ? `all ${tokens} greedy tokens sit at a top-1 tie: whether each is its own top-1 cannot be decided` : undefined,
    `${prompts.length} chat prompts at once, ${tokens} greedy tokens: each its own top-1 with the top-1's log-prob (${decided} decided, ${tokens - decided} at a tie), top-${GREEDY_TOP} sorted with mass ≤ 1; streamed equals not streamed`, tolerance, gaps);
}

type LegacyLogprobs = { tokens?: string[]; token_logprobs?: (number | null)[]; top_logprobs?: (Record<string, number> | null)[] };

/** A legacy completions `logprobs` object as reports (its top lists are objects, so they are ranked here); undefined where not that shape. */
function legacyReports(lp: LegacyLogprobs | undefined): (ReportedToken | undefined)[] | undefined {
  if (!Array.isArray(lp?.tokens) || !Array.isArray(lp.token_logprobs) || !Array.isArray(lp.top_logprobs) || lp.token_logprobs.length !== lp.tokens.length || lp.top_logprobs.length !== lp.tokens.length) return undefined;
  return lp.tokens.map((token, i) => {
    const logprob = lp.token_logprobs![i];
    const top = lp.top_logprobs![i];
    return typeof logprob === "number" && top !== null && typeof top === "object" ? { token, logprob, top: rankedDescending(top) } : undefined;
  });
}

/**
 * Teacher forcing through another code path: greedy completions of several prompts at once with
 * `logprobs`, then each prompt + its generated text sent back with `echo` + `logprobs` +
 * `max_tokens: 0`. Each generated token's log-prob must be what the server scores for it there,
 * and the echo's top-1 at that position the generated token (lm-eval's is_greedy). SKIPPED where
 * the server does not score an echoed prompt, or re-tokenizes the text differently, or every
 * position is a tie.
 */
async function greedyLogprobsEcho(target: ConformanceTarget): Promise<CheckResult> {
  const tolerance = target.logprobTolerance ?? DEFAULT_LOGPROB_TOLERANCE;
  const prompts = ["The model runs", "Roses are red", "Once upon a", "Hello there"].slice(0, greedyConcurrency(target));
  const echo = (prompt: string) => postJson(target, "/v1/completions", { prompt, max_tokens: 0, echo: true, logprobs: GREEDY_TOP, temperature: 0 });
  const probe = await echo(prompts[0]);
  const probed = legacyReports(probe.json.choices?.[0]?.logprobs as LegacyLogprobs | undefined);
  if (probe.status !== 200 || probed === undefined || !(probe.json.choices?.[0]?.text ?? "").endsWith(prompts[0])) {
    return { status: "skip", detail: `the server does not score an echoed prompt (echo + logprobs ${GREEDY_TOP} + max_tokens 0: status ${probe.status}, no token_logprobs over the prompt), so its greedy log-probs cannot be teacher-forced through it` };
  }
  const generated = await Promise.all(prompts.map((prompt) => postJson(target, "/v1/completions", { prompt, max_tokens: GREEDY_TOKENS, temperature: 0, logprobs: GREEDY_TOP })));
  const problems: string[] = [];
  const unaligned: string[] = [];
  const gaps: [number, number][] = [];
  let decided = 0;
  let tokens = 0;
  for (const [n, prompt] of prompts.entries()) {
    const label = JSON.stringify(prompt);
    const choice = generated[n].json.choices?.[0];
    const reports = legacyReports(choice?.logprobs as LegacyLogprobs | undefined);
    if (generated[n].status !== 200 || reports === undefined || reports.some((r) => r === undefined) || reports.length !== generated[n].json.usage?.completion_tokens) {
      problems.push(`${label}: status ${generated[n].status}, no token_logprobs with top_logprobs for each of ${generated[n].json.usage?.completion_tokens} generated tokens`);
      continue;
    }
    const own = reports as ReportedToken[];
    const judged = judgeAll(label, own, undefined, tolerance);
    problems.push(...judged.problems);
    const text = own.map((r) => r.token).join("");
    if (choice?.text !== text) problems.push(`${label}: the tokens spell ${JSON.stringify(text)}, the text is ${JSON.stringify(choice?.text)}`);
    const scored = await echo(prompt + text);
    const all = legacyReports(scored.json.choices?.[0]?.logprobs as LegacyLogprobs | undefined);
    const tail = own.length === 0 ? [] : all?.slice(-own.length);
    if (scored.status !== 200 || all === undefined || tail!.some((r, i) => r?.token !== own[i].token)) {
      unaligned.push(label);
      continue;
    }
    tokens += own.length;
    own.forEach((r, i) => {
      const forced = tail![i]!;
      gaps.push([r.logprob, forced.logprob]);
      if (!logprobsAgree(r.logprob, forced.logprob, tolerance)) problems.push(`${label} token ${i} ${JSON.stringify(r.token)}: generated with log-prob ${r.logprob}, echo scores it ${forced.logprob}`);
      if (isTopTie(forced.top, tolerance)) return;
      decided++;
      if (forced.top[0].token !== r.token) problems.push(`${label} token ${i}: echo's top-1 there is ${JSON.stringify(forced.top[0].token)}, greedy generated ${JSON.stringify(r.token)}`);
    });
  }
  const skipped = tokens === 0 ? `no prompt's echo re-tokenized its generated text into the generated tokens (${unaligned.join(", ")}): nothing to compare`
    : decided === 0 ? `all ${tokens} teacher-forced positions sit at a top-1 tie` : undefined;
  return greedyVerdict(problems, skipped, `${prompts.length} prompts at once, ${tokens} greedy tokens: each log-prob what echo scores for it, echo's top-1 the generated token at ${decided} untied positions${unaligned.length > 0 ? `; ${unaligned.length} prompt(s) re-tokenized otherwise, not compared: ${unaligned.join(", ")}` : ""}`, tolerance, gaps);
}
