import { test } from "uvu";
import * as assert from "uvu/assert";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { CONFORMANCE_CHECKS } from "../harness/conformance/checks.js";
import { TEXT_CHECKS } from "../harness/conformance/groups/text.js";
import type { ConformanceTarget } from "../harness/conformance/target.js";
import { openTextReference, type OpenedTextReference } from "../harness/conformance/text-reference.js";
import { resolveModel } from "../harness/fixtures/registry.js";
import { httpCall } from "../harness/sut/http-call.js";
import { startManagedServer, stopManagedServer, type ManagedServer } from "../harness/sut/managed-server.js";
import { SERVER_FAULT_ENV } from "../server/faults.js";

/*
 * The text conformance checks (harness/conformance/groups/text.ts) against our server on Llama 3's
 * vocabulary: the clean server passes every one, and each check fails on a build broken in the way
 * it exists to catch — a planted server fault (text-by-detokenize: pieces from llama_detokenize) or,
 * for the faults no planted switch makes, a FAKE proxy that spoils the clean server's answers.
 */

let llamaPath: string;
/** Llama 3's vocabulary, loaded once as the checks' reference (a conformance arm opens it the same way). */
let reference: OpenedTextReference;
let clean: ManagedServer;
let proxy: Server;
let proxyUrl: string;

const start = async (modelPath: string, fault?: string): Promise<ManagedServer> => {
  // The planted fault reaches the server through the environment its process inherits.
  if (fault !== undefined) process.env[SERVER_FAULT_ENV] = fault;
  try {
    return await startManagedServer({ modelPath, slots: 2, queue: 8, contextSize: 1024, threads: 1, flashAttention: false, bootTimeoutS: 120 });
  } finally {
    delete process.env[SERVER_FAULT_ENV];
  }
};

const target = (baseUrl: string): ConformanceTarget => ({ baseUrl, model: "m", expectMetrics: [], textReference: reference.reference });

/** The FAKE proxy's spoiling of a request body and its answer, by fault. */
type Spoil = "stream-repeats" | "empty-500" | "special-as-text";
let spoil: Spoil = "stream-repeats";

/**
 * FAKE: forwards to the clean server, then breaks one thing. stream-repeats: every streamed text
 * chunk carries the previous chunk's text again (a renderer that re-sends what it rewrote);
 * empty-500: an empty prompt gets HTTP 500; special-as-text: a text prompt is sent on as the ids
 * of its plain-text tokenization (special-token text not parsed).
 */
async function forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
  let raw = "";
  for await (const chunk of req) raw += chunk;
  const body = (raw === "" ? undefined : JSON.parse(raw)) as Record<string, unknown> | undefined;
  if (spoil === "empty-500" && body?.prompt === "") return void res.writeHead(500, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "FAKE", type: "server_error" } }));
  if (spoil === "special-as-text" && typeof body?.prompt === "string") {
    body.prompt = JSON.parse((await httpCall(`${clean.baseUrl}/tokenize`, { body: { content: body.prompt, add_special: true, parse_special: false } })).text).tokens;
  }
  const answer = await httpCall(`${clean.baseUrl}${req.url}`, { method: req.method, ...(body === undefined ? {} : { body }) });
  let text = answer.text;
  if (spoil === "stream-repeats" && body?.stream === true) {
    let previous = "";
    text = text.split("\n\n").map((event) => {
      if (!event.startsWith("data: {")) return event;
      const parsed = JSON.parse(event.slice(6)) as { choices?: { text?: string; delta?: { content?: string } }[] };
      const choice = parsed.choices?.[0];
      const own = choice?.text ?? choice?.delta?.content;
      if (choice === undefined || own === undefined || own === "") return event;
      if (choice.text !== undefined) choice.text = previous + own;
      else choice.delta!.content = previous + own;
      previous = own;
      return `data: ${JSON.stringify(parsed)}`;
    }).join("\n\n");
  }
  res.writeHead(answer.status, { "content-type": String(answer.headers["content-type"] ?? "application/json") }).end(text);
}

test.before(async () => {
  llamaPath = (await resolveModel("llama-llama3-vocab:F32")).path;
  reference = await openTextReference(llamaPath);
  clean = await start(llamaPath);
  proxy = createServer((req, res) => void forward(req, res).catch((error: unknown) => res.writeHead(502).end(String(error))));
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as { port: number }).port}`;
});
test.after(async () => {
  await stopManagedServer(clean);
  await reference.close();
  await new Promise<void>((resolve) => proxy.close(() => resolve()));
});

test("the text group is registered with the other conformance groups", () => {
  for (const name of Object.keys(TEXT_CHECKS)) assert.is(CONFORMANCE_CHECKS[name], TEXT_CHECKS[name], name);
});

test("our server on Llama 3's vocabulary: every text check passes; the issue's examples come back exactly", async () => {
  for (const [name, check] of Object.entries(TEXT_CHECKS)) {
    const result = await check(target(clean.baseUrl));
    assert.is(result.status, "pass", `${name}: ${result.detail}`);
  }
  const tokenize = async (body: Record<string, unknown>) => JSON.parse((await httpCall(`${clean.baseUrl}/tokenize`, { body })).text).tokens as unknown;
  assert.equal(await tokenize({ content: "Hi<|eot_id|>" }), [13347, 128009], "llama-server's defaults: nothing added, special-token text parsed");
  assert.equal(await tokenize({ content: "Hi<|eot_id|>", add_special: true, parse_special: false }), [128000, 13347, 27, 91, 68, 354, 851, 91, 29]);
  for (const prompt of ["rock ' n ' roll ' s", "x === vs !== y", "Is it ? Yes !"]) {
    const echoed = JSON.parse((await httpCall(`${clean.baseUrl}/v1/completions`, { body: { prompt, echo: true, max_tokens: 0 } })).text).choices[0].text as string;
    assert.is(echoed, prompt);
  }
});

test("FAULT text-by-detokenize (pieces from llama_detokenize, whose clean-up drops spaces): echo_text, tokenize_dialect and detokenize_text fail, naming the text", async () => {
  const faulty = await start(llamaPath, "text-by-detokenize");
  try {
    const echo = await CONFORMANCE_CHECKS.echo_text(target(faulty.baseUrl));
    assert.is(echo.status, "fail");
    assert.match(echo.detail, /"x === vs !== y": echoed "x === vs!== y/);
    const detokenize = await CONFORMANCE_CHECKS.detokenize_text(target(faulty.baseUrl));
    assert.is(detokenize.status, "fail");
    assert.match(detokenize.detail, /"<\|begin_of_text\|>x === vs!== y", llama.cpp's pieces give "<\|begin_of_text\|>x === vs !== y"/);
    const tokenize = await CONFORMANCE_CHECKS.tokenize_dialect(target(faulty.baseUrl));
    assert.is(tokenize.status, "fail");
    assert.match(tokenize.detail, /with_pieces: .*"piece":"!=="/);
  } finally {
    await stopManagedServer(faulty);
  }
});

test("FAKE stream that repeats earlier text: text_of_ids and echo_text fail on the streamed answers", async () => {
  spoil = "stream-repeats";
  const text = await CONFORMANCE_CHECKS.text_of_ids(target(proxyUrl));
  assert.is(text.status, "fail");
  assert.match(text.detail, /^\/v1\/completions greedy streamed: text ".*" is not the text of its 24 ids/);
  const echo = await CONFORMANCE_CHECKS.echo_text(target(proxyUrl));
  assert.is(echo.status, "fail");
  assert.match(echo.detail, /streamed: ".*", not the non-streamed/);
});

test("FAKE special-token text read as plain text, and an empty prompt answered 500: special_token_prompt and empty_prompt fail", async () => {
  spoil = "special-as-text";
  const special = await CONFORMANCE_CHECKS.special_token_prompt(target(proxyUrl));
  assert.is(special.status, "fail");
  assert.match(special.detail, /prompt "<\|eot_id\|>Hello there<\|eot_id\|>": status 200, prompt_tokens 17; llama.cpp parses it to 5 ids \(17 as plain text\)/);
  spoil = "empty-500";
  const empty = await CONFORMANCE_CHECKS.empty_prompt(target(proxyUrl));
  assert.is(empty.status, "fail");
  assert.match(empty.detail, /^an empty prompt: status 500/);
});

test("an empty prompt on Qwen3's vocabulary (no BOS, so no token at all) is a 400 naming the prompt, not a 500", async () => {
  const qwen = await start((await resolveModel("qwen35-qwen3-vocab:F32")).path);
  try {
    const answer = await httpCall(`${qwen.baseUrl}/v1/completions`, { body: { prompt: "", max_tokens: 2 } });
    assert.is(answer.status, 400);
    assert.match(answer.text, /"message":"the prompt is empty: it has no tokens \(this vocabulary adds no BOS\); send some text".*"param":"prompt"/);
  } finally {
    await stopManagedServer(qwen);
  }
});

test.run();
