import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ChatTemplate, ChatTemplateError } from "../harness/chat/chat-template.js";
import { referenceChatTemplate } from "../harness/chat/reference-template.js";
import { encodeFixtureGguf } from "../harness/fixtures/architecture.js";
import { ensureFixture } from "../harness/fixtures/registry.js";
import { buildTinyRandom } from "../harness/fixtures/tiny-random.js";
import { readGguf } from "../harness/gguf/read.js";
import { GgmlType } from "../harness/gguf/types.js";
import { encodeGguf, gguf } from "../harness/gguf/write.js";
import { SUITES_DIR } from "../harness/paths.js";
import { httpCall } from "../harness/sut/http-call.js";
import { startManagedServer, stopManagedServer, type ManagedServer } from "../harness/sut/managed-server.js";
import { builtLlamaServer } from "../harness/sut/llama-server-binary.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("chat-template");
test.after(() => work.remove());
const runs = join(work.path, "runs");

interface Cell { check: string; gate: string; status: string; reproduce?: string; prompt: number | null; position: number | null; expected_id: number | null; observed_id: number | null; prompt_class: string | null; detail: string }
interface Verdict { check: string; status: string; gate: string; reason?: string; metrics?: Record<string, number | string> }

function runShipped(runId: string, args: readonly string[] = [], env: Record<string, string> = {}) {
  const result = bench(["run", "--suite", "chat-template", "--runs-dir", runs, "--run-id", runId, ...args], env);
  const read = (file: string) => readFileSync(join(runs, runId, file), "utf8");
  return {
    result,
    cells: () => read("cells.jsonl").trim().split("\n").map((line) => JSON.parse(line) as Cell),
    verdict: (check: string) => (JSON.parse(read("summary.json")) as { verdicts: Verdict[] }).verdicts.find((v) => v.check === check)!,
  };
}

const corpus = JSON.parse(readFileSync(join(SUITES_DIR, "corpora", "chat-conversations.json"), "utf8")) as { conversations: Array<{ name: string }> };
const post = (server: ManagedServer, path: string, body: unknown) => httpCall(`${server.baseUrl}${path}`, { body });

test("the jinja renderer on Gemma 3's and Llama 3's tokenizer_config.json templates: BOS printed, system folded in, refusals and parse errors as ChatTemplateError", () => {
  const gemma = referenceChatTemplate("gemma3");
  const render = (messages: Array<{ role: "system" | "user" | "assistant"; content: string }>, addGenerationPrompt: boolean) =>
    gemma.template.render({ messages, addGenerationPrompt, bosToken: gemma.bosToken, eosToken: gemma.eosToken });
  assert.is(render([{ role: "system", content: "Be brief." }, { role: "user", content: " hi " }], true), "<bos><start_of_turn>user\nBe brief.\n\nhi<end_of_turn>\n<start_of_turn>model\n");
  assert.is(render([{ role: "user", content: "hi" }, { role: "assistant", content: "yo" }], false), "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\nyo<end_of_turn>\n");
  const refusal = (() => { try { render([{ role: "user", content: "a" }, { role: "user", content: "b" }], true); } catch (error) { return error; } })();
  assert.ok(refusal instanceof ChatTemplateError && refusal.stage === "render", String(refusal));
  assert.match((refusal as Error).message, /Conversation roles must alternate/);
  const llama = referenceChatTemplate("llama3");
  assert.is(llama.template.render({ messages: [{ role: "user", content: "hi " }], addGenerationPrompt: true, bosToken: llama.bosToken, eosToken: llama.eosToken }),
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  assert.throws(() => new ChatTemplate("{% if %}"), (error: unknown) => error instanceof ChatTemplateError && error.stage === "parse");
});

test("the shipped suite's Qwen3 arm: our server token-identical to the reference on every conversation, llama-server too but for its listed difference", () => {
  const { result, cells, verdict } = runShipped("shipped", ["--arm", "qwen3 vocab"]);
  assert.is(result.status, 0, result.stdout + result.stderr);
  const server = verdict("chat_template_server");
  assert.equal([server.status, server.gate, server.metrics?.agree, server.metrics?.unexplained, server.metrics?.props], ["pass", "required", corpus.conversations.length, 0, "pass"]);
  const ours = cells().filter((c) => c.check === "chat_template_server" && c.prompt !== null);
  assert.equal(ours.map((c) => c.prompt_class), corpus.conversations.map((c) => c.name), "a cell per conversation, in corpus order");
  assert.ok(ours.every((c) => c.status === "pass" && /^[\w-]+: \d+ ids identical/.test(c.detail)), ours.map((c) => c.detail).join("\n"));
  const llamaServer = verdict("chat_template_llama_server");
  if (builtLlamaServer() === undefined) {
    assert.is(llamaServer.status, "skip");
    assert.ok(cells().filter((c) => c.check === "chat_template_llama_server").every((c) => c.status === "skip" && /llama-server is not built/.test(c.detail)));
    return;
  }
  assert.equal([llamaServer.status, llamaServer.metrics?.agree, llamaServer.metrics?.known, llamaServer.metrics?.unexplained], ["pass", corpus.conversations.length - 2, 2, 0]);
  const known = cells().filter((c) => c.check === "chat_template_llama_server" && c.detail.includes("KNOWN DIFFERENCE"));
  assert.equal(known.map((c) => [c.prompt_class, c.gate, c.status]), [["multi-turn-ending-on-assistant", "informational", "fail"], ["tool-call-compact-arguments", "informational", "fail"]]);
  // The reference closes the last assistant turn (<|im_end|> = 151645); llama-server leaves it open to continue.
  assert.equal([known[0].expected_id, known[0].observed_id], [151645, null]);
  assert.match(known[0].detail, /--prefill-assistant/);
  // {"amount":100 as sent vs {"amount": 100 re-serialized: "1" (16) against a space (220).
  assert.equal([known[1].expected_id, known[1].observed_id], [16, 220]);
  assert.match(known[1].detail, /reference …": \{\\"amount\\":100,/);
});

test("FAULT chat-template-own (our old template although the file has one) fails the suite naming the conversation, the token and the character", () => {
  const { result, cells, verdict } = runShipped("fault", ["--arm", "qwen3 vocab", "--prompt", "0", "--prompt", "9"], { BENCH_SERVER_FAULT: "chat-template-own" });
  assert.is(result.status, 1, result.stdout + result.stderr);
  assert.is(verdict("chat_template_server").status, "fail");
  const failing = cells().filter((c) => c.check === "chat_template_server" && c.status === "fail");
  assert.equal(failing.map((c) => c.prompt_class), ["one-user-turn", "tool-call-round-trip"]);
  // Qwen3's <|im_start|> (151644) where the plain template writes "User".
  assert.equal([failing[0].position, failing[0].expected_id, failing[0].observed_id], [0, 151644, 1474]);
  assert.match(failing[0].detail, /^one-user-turn: first differing token 0: reference 151644 "<\|im_start\|>" vs server 1474 "User"; first differing character 0: reference "<\|im_start\|>user\\n/);
  assert.match(failing[1].detail, /server refuses \(HTTP 400: .*cannot write tools or tool calls\), the reference renders it/);
  assert.match(failing[0].reproduce ?? "", /--prompt 0$/);
});

test("fail closed: a listed difference that agrees fails, an unlisted one fails naming the conversation, a typo in the list is bad input", () => {
  const shipped = JSON.parse(readFileSync(join(SUITES_DIR, "chat-template.json"), "utf8")) as Record<string, unknown>;
  const write = (name: string, knownDifferences: object[]) => {
    const path = join(work.path, `${name}.json`);
    writeFileSync(path, JSON.stringify({ ...shipped, corpus: join(SUITES_DIR, "corpora", "chat-conversations.json"), known_differences: knownDifferences }));
    return path;
  };
  const typo = bench(["run", "--suite", write("typo", [{ conversation: "no-such-conversation", side: "server", reason: "names nothing in the corpus" }]), "--runs-dir", runs]);
  assert.is(typo.status, 2, typo.stdout + typo.stderr);
  assert.match(typo.stderr + typo.stdout, /known_differences\[0\]\.conversation: known difference names no conversation of the corpus: "no-such-conversation"/);
  const stale = bench(["run", "--suite", write("stale", [{ conversation: "one-user-turn", side: "server", reason: "a difference that is not there" }]), "--arm", "qwen3 vocab", "--prompt", "0", "--prompt", "4", "--runs-dir", runs, "--run-id", "stale"]);
  assert.is(stale.status, 1, stale.stdout + stale.stderr);
  const cells = readFileSync(join(runs, "stale", "cells.jsonl"), "utf8").trim().split("\n").map((line) => JSON.parse(line) as Cell);
  assert.ok(cells.some((c) => c.check === "chat_template_server" && c.status === "fail" && c.gate === "required" && /^one-user-turn: listed as a known difference of server but it agrees/.test(c.detail)));
  if (builtLlamaServer() === undefined) return;
  const unlisted = cells.find((c) => c.check === "chat_template_llama_server" && c.status === "fail")!;
  assert.equal([unlisted.prompt_class, unlisted.position, unlisted.detail.includes("KNOWN")], ["multi-turn-ending-on-assistant", 34, false]);
});

test("our server renders chat with the file's template: /props, the x-chat-template header, the same ids in /apply-template and the chat path", async () => {
  const server = await startManagedServer({ modelPath: await ensureFixture("qwen35-qwen3-vocab", "F32"), slots: 1, queue: 1, contextSize: 512, threads: 1, flashAttention: false, bootTimeoutS: 120 });
  try {
    const props = JSON.parse((await httpCall(`${server.baseUrl}/props`)).text) as Record<string, unknown>;
    assert.equal([props.chat_template_origin, props.bos_token, props.eos_token], ["gguf", "<|endoftext|>", "<|im_end|>"]);
    assert.is(props.chat_template, readGguf(await ensureFixture("qwen35-qwen3-vocab", "F32")).metadata.get("tokenizer.chat_template")?.value);
    const messages = [{ role: "developer", content: "Be brief." }, { role: "user", content: [{ type: "text", text: "hi" }] }];
    const applied = JSON.parse((await post(server, "/apply-template", { messages })).text) as { prompt: string; prompt_token_ids: number[] };
    assert.is(applied.prompt, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    assert.equal(applied.prompt_token_ids.slice(0, 3), [151644, 8948, 198], "special-token text parsed: <|im_start|> system \\n");
    const chat = await post(server, "/v1/chat/completions", { messages, max_tokens: 1, temperature: 0 });
    assert.is(chat.status, 200, chat.text);
    assert.is(chat.headers["x-chat-template"], "gguf");
    assert.is((JSON.parse(chat.text) as { usage: { prompt_tokens: number } }).usage.prompt_tokens, applied.prompt_token_ids.length);
    const bad = await post(server, "/v1/chat/completions", { messages: [{ role: "assistant", content: null, tool_calls: [{ type: "function", function: { name: "f", arguments: { a: 1 } } }] }] });
    assert.equal([bad.status, JSON.parse(bad.text).error.param], [400, "messages[0].tool_calls[0]"]);
  } finally {
    await stopManagedServer(server);
  }
});

/** tiny-random with a chat template written into its metadata (or none). */
function tinyRandomWithTemplate(name: string, template: string | undefined): string {
  const model = buildTinyRandom();
  const base = join(work.path, "tiny-random.gguf");
  writeFileSync(base, encodeFixtureGguf(model, GgmlType.F32));
  const metadata = [...readGguf(base).metadata.entries()].filter(([key]) => key !== "tokenizer.chat_template");
  const tensors = model.tensors.map((t) => ({ name: t.name, dims: t.dims, type: GgmlType.F32, data: new Uint8Array(t.values.buffer) }));
  const path = join(work.path, `${name}.gguf`);
  writeFileSync(path, encodeGguf(template === undefined ? metadata : [...metadata, ["tokenizer.chat_template", gguf.str(template)]], tensors));
  return path;
}

test("a file without a template gets the plain one (and says so); a template that refuses is a 400, one that does not parse a 500, both with the reason, and the server keeps serving", async () => {
  const plain = await startManagedServer({ modelPath: tinyRandomWithTemplate("no-template", undefined), slots: 1, queue: 1, contextSize: 256, threads: 1, flashAttention: false, bootTimeoutS: 60 });
  try {
    assert.is(JSON.parse((await httpCall(`${plain.baseUrl}/props`)).text).chat_template_origin, "builtin");
    const applied = JSON.parse((await post(plain, "/apply-template", { messages: [{ role: "user", content: "hi" }] })).text) as { prompt: string };
    assert.is(applied.prompt, "User: hi | Assistant:");
    const off = JSON.parse((await post(plain, "/apply-template", { messages: [{ role: "user", content: "hi" }], add_generation_prompt: false })).text) as { prompt: string };
    assert.is(off.prompt, "User: hi");
    const tools = await post(plain, "/apply-template", { messages: [{ role: "user", content: "hi" }], tools: [{ type: "function", function: { name: "f" } }] });
    assert.equal([tools.status, JSON.parse(tools.text).error.message], [400, "this model file carries no chat template, and the server's plain one cannot write tools or tool calls"]);
    const chat = await post(plain, "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }], max_tokens: 1 });
    assert.equal([chat.status, chat.headers["x-chat-template"]], [200, "builtin"]);
  } finally {
    await stopManagedServer(plain);
  }
  const gemma = referenceChatTemplate("gemma3").template.source;
  const strict = await startManagedServer({ modelPath: tinyRandomWithTemplate("gemma-template", gemma), slots: 1, queue: 1, contextSize: 256, threads: 1, flashAttention: false, bootTimeoutS: 60 });
  try {
    const refused = await post(strict, "/v1/chat/completions", { messages: [{ role: "user", content: "a" }, { role: "user", content: "b" }], max_tokens: 1 });
    assert.is(refused.status, 400);
    assert.is(JSON.parse(refused.text).error.message, "the chat template fails on these messages: Conversation roles must alternate user/assistant/user/assistant/...");
    assert.is((await post(strict, "/apply-template", { messages: [{ role: "user", content: "a" }] })).status, 200);
  } finally {
    await stopManagedServer(strict);
  }
  const broken = await startManagedServer({ modelPath: tinyRandomWithTemplate("broken-template", "{% for m in messages %}{{ m.content }"), slots: 1, queue: 1, contextSize: 256, threads: 1, flashAttention: false, bootTimeoutS: 60 });
  try {
    const chat = await post(broken, "/v1/chat/completions", { messages: [{ role: "user", content: "a" }], max_tokens: 1 });
    assert.is(chat.status, 500);
    assert.match(JSON.parse(chat.text).error.message, /^the chat template does not parse: .+ \(the model file's tokenizer\.chat_template\)$/);
    assert.is((await post(broken, "/v1/completions", { prompt: "a", max_tokens: 1 })).status, 200, "completions still serve");
  } finally {
    await stopManagedServer(broken);
  }
});

test.run();
