import { httpCall } from "../../sut/http-call.js";
import { fail, isCompletion, isErrorObject, pass, post, readEvents, type ConformanceGroup } from "../target.js";

/** The endpoints, their framing and their answers' fields: what every OpenAI-compatible server serves. */
export const API_SURFACE_CHECKS: ConformanceGroup = {
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
};
