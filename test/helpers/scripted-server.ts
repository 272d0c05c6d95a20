import { setTimeout as sleep } from "node:timers/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * FAKE, for timing and fault tests only: an SSE server whose every delay is scripted, so metrics
 * can be checked against hand-computed values, and which misbehaves on cue (429, malformed SSE,
 * a reset or a stall mid-stream) in ways a real server cannot be made to on demand.
 */
export interface Script {
  /** Milliseconds before the first content event. */
  readonly firstMs: number;
  /** Milliseconds between content events. */
  readonly gapMs: number;
  readonly tokens: number;
  /** A role-only chunk at once, as OpenAI chat streams begin (must not count as the first token). */
  readonly roleChunkFirst?: boolean;
  /**
   * Misbehaviour for request number n (0-based), if any. "drop-reset" / "drop-close": the request is
   * read and the connection is closed with no byte of a response (RST / FIN) — a keep-alive
   * connection the server was closing just as the request went out, on demand.
   */
  readonly fault?: (n: number) => "429" | "malformed" | "reset" | "stall" | "drop-reset" | "drop-close" | undefined;
  /** Node's own keep-alive limits (real, not scripted): the last response on a connection says `Connection: close`, as cpp-httplib's 100th does. */
  readonly requestsPerConnection?: number;
}

/**
 * What the server really did for one request, stamped on the client's clock (both live in the test's
 * process): under CPU contention its timers fire late, so timing checks compare the client's
 * numbers with these rather than with the script.
 */
export interface ServedTimeline {
  readonly body: string;
  readonly receivedNs: bigint;
  /** Stamped just before each content event was written (never the role-only chunk). */
  readonly contentWritesNs: bigint[];
}

export async function startScriptedServer(script: Script): Promise<{ url: string; close: () => Promise<void>; served: () => number; connections: () => number; timeline: (body: string) => ServedTimeline | undefined }> {
  let count = 0;
  let connections = 0;
  const timelines: ServedTimeline[] = [];
  const server: Server = createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += (chunk as Buffer).toString();
    const timeline: ServedTimeline = { body, receivedNs: process.hrtime.bigint(), contentWritesNs: [] };
    if (req.url === "/v1/models") {
      res.writeHead(200, { "content-type": "application/json" });
      return void res.end(JSON.stringify({ data: [{ id: "scripted" }] }));
    }
    if (req.url === "/metrics") return void res.end("");
    const n = count++;
    timelines.push(timeline);
    const fault = script.fault?.(n);
    if (fault === "drop-reset") return void req.socket.resetAndDestroy();
    if (fault === "drop-close") return void req.socket.end();
    if (fault === "429") {
      res.writeHead(429, { "content-type": "application/json" });
      return void res.end(JSON.stringify({ error: { message: "busy", type: "rate_limit_exceeded" } }));
    }
    res.writeHead(200, { "content-type": "text/event-stream" });
    if (script.roleChunkFirst === true) res.write(`data: ${JSON.stringify({ choices: [{ delta: { role: "assistant" } }] })}\n\n`);
    if (fault === "malformed") {
      await sleep(script.firstMs);
      return void res.end("this is not SSE\n\n");
    }
    await sleep(script.firstMs);
    for (let i = 0; i < script.tokens; i++) {
      if (i > 0) await sleep(script.gapMs);
      timeline.contentWritesNs.push(process.hrtime.bigint());
      res.write(`data: ${JSON.stringify({ choices: [{ text: "x", delta: { content: "x" }, token_ids: [7] }] })}\n\n`);
      if (fault === "reset" && i === 1) return void res.socket?.destroy();
      // Silent from here on, until the client gives up and closes the connection.
      if (fault === "stall" && i === 1) return;
    }
    res.write(`data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 3, completion_tokens: script.tokens } })}\n\n`);
    res.end("data: [DONE]\n\n");
  });
  if (script.requestsPerConnection !== undefined) server.maxRequestsPerSocket = script.requestsPerConnection;
  server.on("connection", () => { connections++; });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
    served: () => count,
    connections: () => connections,
    timeline: (body) => timelines.find((served) => served.body === body),
  };
}

/**
 * FAKE vLLM-style server, for dialect probing only (vLLM itself cannot run here): vLLM's field names
 * (/tokenize {prompt} → {tokens}, /detokenize {tokens} → {prompt}, `return_tokens_as_token_ids`,
 * `prompt_logprobs` maps id → {logprob, rank}) over a rule instead of a model: vocabulary of
 * `VOCAB` ids, BOS 1, text = one id per character (code % VOCAB), and the "model" puts
 * probability 1/2 on (last + 1) % VOCAB, 1/4 on (last + 2) % VOCAB, … — so every answer can be
 * computed by hand. It refuses llama.cpp's and our shapes as vLLM does (404, or 400 on a wrong field).
 */
export const FAKE_VLLM_VOCAB = 64;

export interface FakeVllmOptions {
  /** Bearer key every request must carry. */
  readonly apiKey?: string;
  /** Answer text only, ignoring `return_tokens_as_token_ids` and `prompt_logprobs` (a plain OpenAI server). */
  readonly textOnly?: boolean;
}

/** The FAKE vLLM's distribution after `last`: rank r (1-based) is (last + r) % VOCAB with log-prob −r·ln 2. */
export function fakeVllmTop(last: number, k: number): { ids: number[]; logprobs: number[] } {
  const ids = Array.from({ length: k }, (_, r) => (last + r + 1) % FAKE_VLLM_VOCAB);
  return { ids, logprobs: ids.map((_, r) => -(r + 1) * Math.LN2) };
}

export async function startFakeVllmServer(options: FakeVllmOptions = {}): Promise<{ url: string; close: () => Promise<void>; requests: () => string[] }> {
  const seen: string[] = [];
  const server: Server = createServer(async (req, res) => {
    let raw = "";
    for await (const chunk of req) raw += (chunk as Buffer).toString();
    seen.push(`${req.method} ${req.url} ${req.headers.authorization ?? ""}`);
    const send = (status: number, body: unknown) => { res.writeHead(status, { "content-type": "application/json" }); res.end(JSON.stringify(body)); };
    const refuse = (status: number, message: string) => send(status, { object: "error", message, type: "BadRequestError", code: status });
    if (options.apiKey !== undefined && req.headers.authorization !== `Bearer ${options.apiKey}`) return refuse(401, "Unauthorized");
    if (req.url === "/health") return void res.writeHead(200).end();
    if (req.url === "/v1/models") return send(200, { object: "list", data: [{ id: "fake-vllm", object: "model", owned_by: "vllm" }] });
    const body = (raw === "" ? {} : JSON.parse(raw)) as Record<string, unknown>;
    const textIds = (text: string) => [...text].map((c) => c.charCodeAt(0) % FAKE_VLLM_VOCAB);
    if (req.url === "/tokenize") {
      if (typeof body.prompt !== "string") return refuse(400, "prompt: Field required");
      return send(200, { tokens: [...(body.add_special_tokens === false ? [] : [1]), ...textIds(body.prompt)], count: 0, max_model_len: 4096 });
    }
    if (req.url === "/detokenize") {
      if (!Array.isArray(body.tokens)) return refuse(400, "tokens: Field required");
      return send(200, { prompt: (body.tokens as number[]).filter((id) => id !== 1).map((id) => String.fromCharCode(id)).join("") });
    }
    if (req.url !== "/v1/completions") return refuse(404, "Not Found");
    if (body.echo === true) return refuse(400, "echo is not supported with token-id prompts here");
    const prompt = body.prompt as number[];
    const maxTokens = body.max_tokens as number;
    const generated: number[] = [];
    for (let i = 0; i < maxTokens; i++) generated.push(fakeVllmTop(generated[i - 1] ?? prompt[prompt.length - 1], 1).ids[0]);
    const asIds = body.return_tokens_as_token_ids === true && options.textOnly !== true;
    const spell = (id: number) => (asIds ? `token_id:${id}` : String.fromCharCode(id));
    const k = typeof body.prompt_logprobs === "number" && options.textOnly !== true ? body.prompt_logprobs : undefined;
    const promptLogprobs = k === undefined ? undefined : prompt.map((id, at) => {
      if (at === 0) return null;
      const top = fakeVllmTop(prompt[at - 1], k);
      const row: Record<string, { logprob: number; rank: number; decoded_token: string }> = {};
      top.ids.forEach((topId, r) => { row[String(topId)] = { logprob: top.logprobs[r], rank: r + 1, decoded_token: spell(topId) }; });
      // vLLM adds the prompt token itself when it is not in the top-k, with its true rank.
      if (!top.ids.includes(id)) row[String(id)] = { logprob: -40, rank: FAKE_VLLM_VOCAB, decoded_token: spell(id) };
      return row;
    });
    return send(200, {
      id: "cmpl-fake", object: "text_completion", model: "fake-vllm",
      choices: [{
        index: 0, text: generated.map((id) => String.fromCharCode(id)).join(""), finish_reason: "length",
        logprobs: body.logprobs === undefined || body.logprobs === null ? null : { tokens: generated.map(spell), token_logprobs: generated.map(() => -Math.LN2), top_logprobs: null, text_offset: [] },
        ...(promptLogprobs === undefined ? {} : { prompt_logprobs: promptLogprobs }),
      }],
      usage: { prompt_tokens: prompt.length, completion_tokens: generated.length, total_tokens: prompt.length + generated.length },
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
    requests: () => [...seen],
  };
}
