// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { askGreedy, askTeacherForced, checkGreedyAnswer, checkKernelAnswer, checkTeacherForcedAnswer } from "../harness/sut/answer-shape.js";
import { float32Tensor, sentinelFilled } from "../kernels/ops/tensor.js";
import { SutGoneError } from "../harness/sut/sut-gone.js";
import { openHttpSut } from "../harness/sut/http.js";
import { runCheck } from "../harness/runner/check.js";
import type { GreedyRequest, SystemUnderTest, TopK } from "../harness/sut/types.js";
import type { RunEvent } from "../harness/results/types.js";
import { assertMatchesSchema } from "../harness/io/json-schema.js";
import { SUMMARY_SCHEMA } from "../harness/results/run-directory.js";

const request: GreedyRequest = { promptIds: [1, 5, 6], maxTokens: 4 };
const reason = (checked: { ok: boolean; reason?: string }) => (checked.ok ? "ok" : checked.reason);

test("kernel answers: one output per requested output, in order, named, with exactly its shape's bytes", () => {
  const kernel = { op: "t", encoding: "F32:F32", inputs: [float32Tensor("x", [2], Float32Array.of(0, 1))], outputs: [sentinelFilled("y", "F32", [2]), sentinelFilled("state_out", "F32", [3])], attrs: {} };
  const y = { name: "y", data: new Uint8Array(8) };
  const state = { name: "state_out", data: new Uint8Array(12) };
  assert.is(reason(checkKernelAnswer(kernel, [y, state])), "ok");
  assert.is(reason(checkKernelAnswer(kernel, [y])), "the answer lists 1 output tensors, the request has 2 (y, state_out)");
  assert.is(reason(checkKernelAnswer(kernel, undefined)), "the answer lists no output tensors, the request has 2 (y, state_out)");
  assert.is(reason(checkKernelAnswer(kernel, [state, y])), 'outputs[0] must be {name: "y", data: base64}');
  assert.is(reason(checkKernelAnswer(kernel, [y, { name: "state_out", data: new Uint8Array(8) }])), "output state_out has 8 bytes, its shape [3] of F32 takes 12");
});

test("greedy answers: exactly max_tokens ids in the vocabulary, or fewer only when ending on an EOS the request allows", () => {
  assert.is(reason(checkGreedyAnswer(request, [7, 8, 9, 10], 300)), "ok");
  assert.is(reason(checkGreedyAnswer(request, [7, 8], 300)), "2 of 4 ids, and it does not end on an end-of-sequence id the request allows");
  assert.is(reason(checkGreedyAnswer(request, [], 300)), "an empty sequence, the request asked for 4 ids");
  assert.is(reason(checkGreedyAnswer({ ...request, eosIds: [2] }, [7, 2], 300)), "ok");
  assert.is(reason(checkGreedyAnswer({ ...request, eosIds: [2] }, [7, 8], 300)), "2 of 4 ids, and it does not end on an end-of-sequence id the request allows");
  assert.is(reason(checkGreedyAnswer(request, [7, 8, 9, 10, 11], 300)), "5 ids, the request asked for max_tokens 4");
  assert.is(reason(checkGreedyAnswer(request, [7, 300, 9, 10], 300)), "at position 1: id 300 is outside the vocabulary (0..299)");
  assert.is(reason(checkGreedyAnswer(request, [7, 1.5, 9, 10], 300)), "at position 1: 1.5 is not an integer token id");
  assert.is(reason(checkGreedyAnswer(request, undefined, 300)), "the answer is missing, not a list of ids");
});

/** A real log-softmax top-k of a 4-token distribution. */
const row = (ids: number[], probabilities: number[]): TopK => ({ ids, logprobs: probabilities.map(Math.log) });
const tf = { promptIds: [1], continuationIds: [5, 6], k: 3 };

test("teacher-forced rows: count, lengths, ids in vocabulary, finite log-probs ≤ 0, sorted, summing to at most 1", () => {
  const good = [row([5, 2, 9], [0.5, 0.3, 0.1]), row([6, 5, 2], [0.9, 0.05, 0.02])];
  assert.is(reason(checkTeacherForcedAnswer(tf, good, 300)), "ok");
  assert.is(reason(checkTeacherForcedAnswer(tf, good.slice(0, 1), 300)), "1 top-k rows, the request has 2 continuation tokens");
  const zeros = good.map((r) => ({ ids: r.ids, logprobs: [0, 0, 0] }));
  assert.is(reason(checkTeacherForcedAnswer(tf, zeros, 300)), "position 0: the top-3 probabilities sum to 3.000 (> 1): not log-softmax values");
  const nan = [good[0], { ids: good[1].ids, logprobs: [NaN, -3, -4] }];
  assert.is(reason(checkTeacherForcedAnswer(tf, nan, 300)), "position 1: log-prob NaN of id 6 is not finite");
  const wire = [good[0], { ids: good[1].ids, logprobs: ["Infinity", -3, -4] }];
  assert.is(reason(checkTeacherForcedAnswer(tf, wire, 300)), "position 1: log-prob Infinity of id 6 is not finite");
  assert.is(reason(checkTeacherForcedAnswer(tf, [good[0], { ids: [6, 5], logprobs: [-0.1, -3] }], 300)), "position 1: 2 ids and 2 log-probs, the request asked for top-3");
  assert.is(reason(checkTeacherForcedAnswer(tf, [good[0], { ids: [6, 5, 999], logprobs: [-0.1, -3, -4] }], 300)), "position 1: id 999 is outside the vocabulary (0..299)");
  assert.is(reason(checkTeacherForcedAnswer(tf, [good[0], { ids: [6, 5, 5], logprobs: [-0.1, -3, -4] }], 300)), "position 1: the top-k repeats an id");
  assert.is(reason(checkTeacherForcedAnswer(tf, [good[0], { ids: [6, 5, 2], logprobs: [0.2, -3, -4] }], 300)), "position 1: log-prob 0.2 of id 6 is above 0");
  assert.is(reason(checkTeacherForcedAnswer(tf, [good[0], { ids: [6, 5, 2], logprobs: [-3, -0.1, -4] }], 300)), "position 1: log-probs are not sorted descending (rank 1)");
});

/** FAKE SUT: answers from a table, erroring on one prompt, or gone, as scripted. */
function scriptedSut(greedy: (requests: readonly GreedyRequest[]) => Promise<number[][]>): SystemUnderTest & { calls: number[] } {
  const calls: number[] = [];
  return {
    label: "scripted", provenance: { kind: "fake", engine: "FAKE", settings: {} }, calls,
    greedy: async (requests) => { calls.push(requests.length); return greedy(requests); },
    teacherForcedTopK: async (requests) => requests.map(() => [row([5, 2, 9], [0.5, 0.3, 0.1])]),
    close: async () => undefined,
  };
}

test("an error on one prompt stays that prompt's: the batch is re-asked one prompt at a time; a gone SUT is not", async () => {
  const requests = [10, 11, 12].map((id) => ({ promptIds: [1, id], maxTokens: 2 }));
  const failsOn11 = scriptedSut(async (batch) => {
    if (batch.some((r) => r.promptIds[1] === 11)) throw new Error("runner greedy: kernel launch failed");
    return batch.map((r) => [r.promptIds[1], 3]);
  });
  const answers = await askGreedy(failsOn11, "greedy", requests, 300);
  assert.equal(answers.map(reason), ["ok", "runner greedy: kernel launch failed", "ok"]);
  assert.equal(failsOn11.calls, [3, 1, 1, 1]);
  assert.equal((await askGreedy(failsOn11, "greedy", [requests[1]], 300)).map(reason), ["runner greedy: kernel launch failed"], "a run of one prompt too");
  const gone = scriptedSut(async () => { throw new SutGoneError("the runner exited (code 5)"); });
  try {
    await askGreedy(gone, "greedy", requests, 300);
    assert.unreachable("a gone SUT ends the check");
  } catch (error) {
    assert.instance(error, SutGoneError);
  }
  assert.equal(gone.calls, [3], "not asked again prompt by prompt");
  const batched = scriptedSut(async () => { throw new Error("out of KV cells"); });
  const viaBatch = { ...batched, batchedGreedy: batched.greedy };
  await askGreedy(viaBatch, "batchedGreedy", requests, 300).then(() => assert.unreachable("a batch is never split into singles"), (error: Error) => assert.is(error.message, "out of KV cells"));
  const short = scriptedSut(async () => [[4, 5]]);
  await askGreedy(short, "greedy", requests, 300).then(() => assert.unreachable(), (error: Error) => assert.is(error.message, "scripted greedy: 1 answers for 3 requests"));
  assert.equal((await askTeacherForced(short, [{ promptIds: [1], continuationIds: [5], k: 3 }], 300)).map(reason), ["ok"]);
});

test("over HTTP, a completion without token_ids is a rejected answer, not an empty list (and a server that never sends them offers no greedy)", async () => {
  let withIds = true;
  const server = createServer((req, res) => {
    let raw = "";
    req.on("data", (chunk: Buffer) => { raw += chunk.toString(); });
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json" });
      if (req.url === "/v1/models") return void res.end(JSON.stringify({ data: [{ id: "fake" }] }));
      // FAKE: ids while the harness probes (max_tokens 2), none once it relies on them.
      const maxTokens = raw === "" ? 0 : (JSON.parse(raw) as { max_tokens?: number }).max_tokens;
      res.end(JSON.stringify({ choices: [{ text: "abc", ...(withIds && req.url === "/v1/completions" && maxTokens === 2 ? { token_ids: [7, 8] } : {}) }] }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const sut = await openHttpSut(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { label: "fake http" });
    const answers = await askGreedy(sut, "greedy", [request, request], 300);
    assert.equal(answers.map(reason), Array(2).fill('choices[0].token_ids is missing, not a list of token ids'));
    withIds = false;
    const never = await openHttpSut(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { label: "fake http" });
    assert.is(never.greedy, undefined);
    assert.match(never.unsupported?.greedy ?? "", /openai: choices\[0\]\.token_ids is missing, not a list of token ids/);
  } finally {
    server.close();
  }
});

test("a NaN or infinite metric fails its check with the reason and becomes null: summary.json stays valid", async () => {
  const events: RunEvent[] = [];
  const scope = { suiteName: "s", arm: { label: "a", gate: "required" as const }, sut: scriptedSut(async () => []), emit: (e: RunEvent) => void events.push(e), signal: new AbortController().signal, reproduce: "bench run" };
  const verdict = await runCheck(scope, "teacher_forced", "required", [], async () => ({ status: "pass", summary: "a teacher-forced: fine", metrics: { kld_topk_mean: NaN, top1: 1, ms_per_token: Infinity } }));
  assert.is(verdict?.status, "fail");
  assert.equal(verdict?.status === "fail" ? verdict.metrics : {}, { kld_topk_mean: null, top1: 1, ms_per_token: null });
  assert.is(verdict?.status === "fail" ? verdict.summary : "", "a teacher-forced: fine; FAIL: the SUT's answers gave non-finite kld_topk_mean = NaN, ms_per_token = Infinity");
  const cells = events.flatMap((e) => (e.kind === "cells" ? e.cells : []));
  assert.equal(cells.map((c) => c.status), ["fail"]);
  assertMatchesSchema({ schema_version: 1, run_id: "r", status: "complete", started: "x", finished: "y", exit_code: 1, harness_version: "0", seed: 0, machine: { hostname: "h", platform: "linux", arch: "x64", cpus: 2, cpu_model: "c", memory_bytes: 1, node: "20" }, command: [], suites: [], oracles: [], suts: [], verdicts: [verdict], counts: { pass: 0, fail: 1, skip: 0, error: 0, required_failed: 1, required_skipped: 0, required_errors: 0 }, summary_lines: [], cells: 1, trace: [], load: [] }, SUMMARY_SCHEMA, "summary.json");
});

test.run();
