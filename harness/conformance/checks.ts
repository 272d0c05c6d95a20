import { setTimeout as sleep } from "node:timers/promises";
import { request } from "undici";
import { httpCall, type ManagedServer } from "../sut/http.js";
import { parsePrometheusText } from "./prometheus.js";

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
  return httpCall(`${target.baseUrl}${path}`, { body, apiKey: target.apiKey });
}

async function metrics(target: ConformanceTarget): Promise<Map<string, number>> {
  return parsePrometheusText((await httpCall(`${target.baseUrl}/metrics`)).text);
}

/** Reads an SSE response, stamping each event; stops after `stopAfter` events when given (then drops the connection). */
async function readEvents(target: ConformanceTarget, path: string, body: unknown, stopAfter?: number): Promise<{ status: number; events: string[]; raw: string }> {
  const controller = new AbortController();
  const response = await request(`${target.baseUrl}${path}`, {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal: controller.signal,
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
    if (stopAfter === undefined) throw error;
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
    const statuses = await Promise.all(paths.map(async (p) => (await httpCall(`${target.baseUrl}${p}`, { apiKey: target.apiKey })).status));
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
      const r = await httpCall(`${target.baseUrl}/v1/completions`, { method: "POST", body: c.body, rawBody: c.raw, apiKey: target.apiKey });
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
};
