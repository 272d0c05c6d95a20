import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { join } from "node:path";
import { readConversations } from "../harness/chat/conversations.js";
import { referenceChatTemplate } from "../harness/chat/reference-template.js";
import { resolveModel } from "../harness/fixtures/registry.js";
import { ggufChatTemplate } from "../harness/gguf/chat-template.js";
import { readGguf } from "../harness/gguf/read.js";
import { SUITES_DIR } from "../harness/paths.js";
import { exitCodeFor } from "../harness/results/verdicts.js";
import type { CellRecord, GateVerdict, RunEvent } from "../harness/results/types.js";
import { runChatTemplateArm } from "../harness/runner/chat-template-runner.js";
import { loadSuite } from "../harness/suites/load.js";
import type { ChatTemplateSuite } from "../harness/suites/chat-template-suite.js";
import { LlamaCppTokenizerSut } from "../harness/sut/llamacpp-tokenizer.js";
import { caseTimeoutOf } from "../harness/sut/with-timeout.js";
import { runInProcess } from "./helpers/in-process-run.js";
import { speculativeSuiteBehindProxy } from "./helpers/speculation-behind-proxy.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

/**
 * "Before you call a gate done, try to get a broken build past it": each newer suite (perplexity,
 * speculative, chat-template) meets a SUT that answers short, hangs, dies mid-run, answers garbage
 * or the wrong shape, and must end in exit 1 (gate failed) or 2 (could not decide), never 0, with a
 * cell naming what was wrong. The breaks are FAKE where no real build shows them on demand.
 */
const work = temporaryDirectory("broken-builds");
test.after(() => work.remove());
const runs = join(work.path, "runs");

interface Cell { arm: string; check: string; status: string; gate: string; prompt: number | null; detail: string }
interface Verdict { arm: string; check: string; status: string; gate: string; reason?: string; summary?: string }

function ran(runId: string) {
  const summary = JSON.parse(readFileSync(join(runs, runId, "summary.json"), "utf8")) as { exit_code: number; verdicts: Verdict[] };
  const cells = readFileSync(join(runs, runId, "cells.jsonl"), "utf8").trim().split("\n").map((line) => JSON.parse(line) as Cell);
  return { summary, cells, verdict: (check: string) => summary.verdicts.find((v) => v.check === check)! };
}

// Perplexity: the FAKE runner wraps the Python reference forward (which passes the F32 arm's bounds clean) and spoils teacher forcing.
const PERPLEXITY_TRIES = [
  { mode: "nan-logprobs", exit: 1, status: "fail", cell: /^chunk 0: position 0: log-prob NaN of id \d+ is not finite$/ },
  { mode: "short-rows", exit: 1, status: "fail", cell: /^chunk 0: 31 top-k rows, the request has 63 continuation tokens$/ },
  // Well formed (finite, sorted, summing to 1) but the log-probs of other ids: only the bounds can catch it, and every one does.
  { mode: "rotated-logprobs", exit: 1, status: "fail", cell: /^FAIL kld mean \S+ > 1e-9$/ },
  { mode: "dies-in-teacher-forcing", exit: 2, status: "error", cell: /^the runner exited \(code 5\); its stderr ended: fabric timeout on chip 2$/ },
  { mode: "hang-in-teacher-forcing", exit: 2, status: "error", cell: /teacherForcedTopK timed out after 3 s \(per-case timeout\)$/ },
] as const;

for (const { mode, exit, status, cell } of PERPLEXITY_TRIES) {
  test(`perplexity, a runner whose teacher forcing is broken (${mode}): exit ${exit}, a ${status} cell naming it`, async () => {
    const runId = `perplexity-${mode}`;
    // In this process: what `bench run --suite perplexity --arm F32 --runner ... --case-timeout 3 --shutdown-grace 1` runs, less a process start.
    const result = await runInProcess(runs, runId, { suites: ["perplexity"], arms: ["F32"], runner: ["python3", "{bench}/test/helpers/fake_runner.py", mode, "{model}"], caseTimeoutS: 3, shutdownGraceS: 1 });
    assert.is(result.code, exit, String(result.error));
    const { summary, cells, verdict } = ran(runId);
    assert.is(summary.exit_code, exit);
    assert.equal([verdict("perplexity").status, verdict("perplexity").gate], [status, "required"]);
    const own = cells.filter((c) => c.check === "perplexity" && c.status === status);
    assert.ok(own.some((c) => cell.test(c.detail)), own.map((c) => c.detail).join("\n"));
  });
}

/**
 * The speculative suite's arm on our server with a draft model, behind the FAKE proxy that breaks its
 * speculating answers (test/helpers/fake-speculation-proxy.ts), one arm per fault: all four faults in
 * one bench run, one process start instead of four. Each arm is its own leg (its own servers and
 * proxy), so one fault's hang or death cannot reach another's cells.
 */
function brokenSpeculationSuite(faults: readonly string[]): string {
  const path = join(work.path, "speculative-faults.json");
  // T = 16 alone, and a per-case timeout a hang reaches quickly but an answer never does (one T=16 answer takes well under a second).
  writeFileSync(path, JSON.stringify({ ...speculativeSuiteBehindProxy(faults), max_tokens: [16], case_timeout_s: 10 }));
  return path;
}

const SPECULATION_TRIES = [
  { fault: "short", exit: 1, status: "fail", cell: /^prompt 0 \(single, T=16\): the speculating server's answer is malformed: 8 of 16 ids, and it does not end on an end-of-sequence id the request allows$/ },
  { fault: "hang", exit: 2, status: "error", cell: /^prompt 0 \(single, T=16\): the speculating server gave no answer: FAKE hang: timed greedy did not answer within 10 s \(per-case timeout, set by case_timeout_s in \S+\/speculative-faults\.json: raise it there, it overrides --case-timeout SECONDS\)$/ },
  { fault: "die", exit: 2, status: "error", cell: /^prompt 0 \(single, T=16\): the speculating server gave no answer: / },
  { fault: "wrong-shape", exit: 2, status: "error", cell: /^prompt 0 \(single, T=16\): the speculating server gave no answer: choices\[0\]\.token_ids is \["\d+",.* not a list of token ids$/ },
] as const;

let speculationRun: { status: number | null; output: string } | undefined;
/** The one run of every speculation fault; its exit is the worst of theirs (an error: 2). */
function brokenSpeculationRun() {
  if (speculationRun === undefined) {
    const result = bench(["run", "--suite", brokenSpeculationSuite(SPECULATION_TRIES.map((t) => t.fault)), "--prompt", "0", "--shutdown-grace", "1", "--runs-dir", runs, "--run-id", "speculative-faults"]);
    speculationRun = { status: result.status, output: result.stdout + result.stderr };
  }
  return speculationRun;
}

for (const { fault, exit, status, cell } of SPECULATION_TRIES) {
  test(`speculative, our server speculating and broken after the probe (${fault}): exit ${exit}, a ${status} cell naming the case`, () => {
    const result = brokenSpeculationRun();
    assert.is(result.status, 2, result.output);
    const { summary, cells } = ran("speculative-faults");
    assert.is(summary.exit_code, 2);
    const own = summary.verdicts.filter((v) => v.arm === `FAKE ${fault}`);
    // The exit this arm's own run would have had.
    assert.is(exitCodeFor(own as GateVerdict[]), exit, JSON.stringify(own));
    const verdict = own.find((v) => v.check === "speculative_greedy")!;
    assert.equal([verdict.status, verdict.gate], [status, "required"]);
    const ownCells = cells.filter((c) => c.arm === `FAKE ${fault}` && c.check === "speculative_greedy" && c.status === status);
    assert.ok(ownCells.some((c) => cell.test(c.detail)), ownCells.map((c) => c.detail).join("\n"));
  });
}

/**
 * FAKE /apply-template server for the chat-template runner: /props as our server answers it, and
 * /apply-template broken as `fault` says (a real server renders or refuses; none hangs, dies or
 * answers the wrong shape on demand). `short` renders as the reference does, less its last id.
 */
async function startBrokenTemplateServer(fault: "short" | "hang" | "wrong-shape" | "die", fileTemplate: string, render: (body: { messages: unknown; tools?: unknown; add_generation_prompt: boolean }) => { text: string; ids: readonly number[] }) {
  const sockets = new Set<Socket>();
  let answered = 0;
  const server: Server = createServer(async (request, response) => {
    let text = "";
    for await (const chunk of request) text += (chunk as Buffer).toString();
    const reply = (body: unknown) => {
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify(body));
    };
    if (request.url === "/props") return reply({ chat_template: fileTemplate, chat_template_origin: "gguf" });
    if (fault === "hang") return;
    if (fault === "die" && answered === 1) {
      // Gone after one answer: nothing listens any more, as after a crash.
      for (const socket of sockets) socket.destroy();
      server.close();
      return;
    }
    answered++;
    if (fault === "wrong-shape") return reply({ prompt: 42 });
    const { text: prompt, ids } = render(JSON.parse(text));
    reply({ prompt, prompt_token_ids: fault === "short" ? ids.slice(0, -1) : ids });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const CHAT_TEMPLATE_TRIES = [
  { fault: "short", exit: 1, status: "fail", cell: /^one-user-turn: first differing token \d+: reference \d+ ".*" vs server \(end\); / },
  { fault: "hang", exit: 2, status: "error", cell: /^one-user-turn-no-generation-prompt: not asked: the server stopped answering at one-user-turn \(server: \/apply-template did not answer within 2 s \(per-case timeout: raise it with --case-timeout SECONDS or case_timeout_s in \S+\/chat-template\.json\)\)$/ },
  { fault: "wrong-shape", exit: 2, status: "error", cell: /^one-user-turn: server \/apply-template answered 200 without a string "prompt"$/ },
  { fault: "die", exit: 2, status: "error", cell: /^one-user-turn-no-generation-prompt: server \/apply-template gave no answer: connect ECONNREFUSED 127\.0\.0\.1:\d+$/ },
] as const;

for (const { fault, exit, status, cell } of CHAT_TEMPLATE_TRIES) {
  test(`chat-template, a server whose /apply-template is broken (${fault}): exit ${exit}, a ${status} cell naming the conversation`, async () => {
    const suite = loadSuite("chat-template") as ChatTemplateSuite;
    const arm = suite.arms.find((a) => a.label === "qwen3 vocab")!;
    const model = await resolveModel(arm.model);
    const tokenizer = await LlamaCppTokenizerSut.open(model.path, arm.label);
    const reference = referenceChatTemplate(arm.reference);
    const fileTemplate = ggufChatTemplate(readGguf(model.path))!;
    const render = (body: { messages: unknown; tools?: unknown; add_generation_prompt: boolean }) => {
      const text = reference.template.render({ messages: body.messages as never, tools: body.tools as never, addGenerationPrompt: body.add_generation_prompt, bosToken: reference.bosToken, eosToken: reference.eosToken });
      return { text, ids: tokenizer.tokenizeText(text, "parsed") };
    };
    const server = await startBrokenTemplateServer(fault, fileTemplate, render);
    const events: RunEvent[] = [];
    try {
      const conversations = readConversations(join(SUITES_DIR, suite.corpus)).map((c, index) => ({ ...c, index })).slice(0, 2);
      await runChatTemplateArm({
        suiteName: suite.name, suite, arm, emit: async (event) => void events.push(event), signal: new AbortController().signal, reproduce: "bench run --suite chat-template",
        sut: { label: `FAKE ${fault}`, provenance: { kind: "fake", engine: "FAKE", settings: {} }, close: async () => {} },
        conversations, tokenizer, reference, fileTemplate, caseTimeout: caseTimeoutOf(suite, 2),
        servers: { server: { baseUrl: server.baseUrl }, "llama-server": { absent: "not asked in this test" } },
      });
    } finally {
      await server.close();
      await tokenizer.close();
    }
    const verdicts: GateVerdict[] = events.flatMap((e) => (e.kind === "verdict" ? [e.verdict] : []));
    const cells: CellRecord[] = events.flatMap((e) => (e.kind === "cells" ? e.cells : []));
    assert.is(exitCodeFor(verdicts), exit);
    const ours = verdicts.find((v) => v.check === "chat_template_server")!;
    assert.equal([ours.status, ours.gate], [status, "required"]);
    const own = cells.filter((c) => c.check === "chat_template_server" && c.status === status);
    assert.ok(own.some((c) => cell.test(c.detail)), own.map((c) => c.detail).join("\n"));
  });
}

// Our server's echo path (prompt log-probs, how the harness teacher-forces a server arm), broken behind the identity check:
// the server runs the goldens' own file, greedy is untouched, and each prompt position reads the row after its own.
test("our server scoring echoed prompts one position late (FAKE echo-one-late): identity and greedy pass, distribution fails, exit 1", () => {
  const result = bench(["run", "--suite", "parity16", "--arm", "server F32", "--prompt", "4", "--prompt", "5", "--runs-dir", runs, "--run-id", "echo-one-late"], { BENCH_SERVER_FAULT: "echo-one-late" });
  assert.is(result.status, 1, result.stdout + result.stderr);
  const { verdict } = ran("echo-one-late");
  assert.equal(["identity", "greedy_parity", "distribution"].map((check) => verdict(check).status), ["pass", "pass", "fail"]);
  assert.equal(verdict("distribution").gate, "required");
});

test.run();
