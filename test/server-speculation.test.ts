/**
 * Our server speculating with a draft model (server/speculation.ts, docs/speculative.md), over real
 * HTTP on loopback on tiny-random with its draft fixture: greedy answers equal the same server's
 * without a draft model, alone and two at once; every answer's `timings` and /metrics count what
 * was drafted and kept; sampling requests run plain; the dialect probe finds speculation only where
 * the server was started with it; a draft of another vocabulary is refused. A sliding-window
 * target (gemma4) drafted by its own Q4_K: rejections restore the window, answers equal the plain
 * server's alone and four at once. The qwen35 target (recurrent rollback) and the planted faults
 * are run through the speculative suite: test/speculative.test.ts; a draft identical to its target
 * on every family: test/server-self-draft.test.ts.
 */
import { test } from "uvu";
import * as assert from "uvu/assert";
import { resolveModel } from "../harness/fixtures/registry.js";
import { httpCall } from "../harness/sut/http-call.js";
import { startManagedServer, stopManagedServer, type ManagedServer } from "../harness/sut/managed-server.js";
import { openHttpSut } from "../harness/sut/http.js";
import { departureFrom, nearTie } from "../harness/load/near-tie.js";
import { bench } from "./helpers/workspace.js";

const DRAFT_MAX = 3;
const MAX_TOKENS = 48;

interface Timings { predicted_n: number; predicted_ms: number; draft_n?: number; draft_n_accepted?: number; draft_accepted_positions?: number[] }

async function complete(server: ManagedServer, prompt: readonly number[], extra: Record<string, unknown> = {}): Promise<{ ids: number[]; timings: Timings }> {
  const response = await httpCall(`${server.baseUrl}/v1/completions`, { body: { prompt, temperature: 0, max_tokens: MAX_TOKENS, ignore_eos: true, ...extra } });
  assert.is(response.status, 200, response.text);
  const body = JSON.parse(response.text) as { choices: { token_ids: number[] }[]; timings: Timings };
  return { ids: body.choices[0].token_ids, timings: body.timings };
}

async function draftCounters(server: ManagedServer): Promise<{ drafted: number; accepted: number }> {
  const text = (await httpCall(`${server.baseUrl}/metrics`)).text;
  const read = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1]);
  return { drafted: read("bench_draft_tokens_total"), accepted: read("bench_draft_tokens_accepted_total") };
}

/** Ids of no text in particular (in every fixture's vocabulary). */
const idRun = (length: number, first: number, step: number): number[] => [1, ...Array.from({ length }, (_, i) => first + ((i * step) % 90))];
const PROMPTS = [idRun(12, 40, 7), idRun(20, 60, 3), idRun(6, 100, 11)];

let plain: ManagedServer;
let speculating: ManagedServer;

test.before(async () => {
  const options = { slots: 2, queue: 4, contextSize: 256, threads: 1, flashAttention: false, kvCacheType: "F32" as const, bootTimeoutS: 120 };
  plain = await startManagedServer({ ...options, modelPath: (await resolveModel("tiny-random:F32")).path });
  speculating = await startManagedServer({ ...options, modelPath: (await resolveModel("tiny-random:F32")).path, draftModel: (await resolveModel("tiny-random-draft:F32")).path, draftMax: DRAFT_MAX });
});
test.after(async () => {
  await stopManagedServer(plain);
  await stopManagedServer(speculating);
});

test("greedy with a draft model equals greedy without, one at a time and two at once; timings and /metrics count the same drafts", async () => {
  const before = await draftCounters(speculating);
  const reference = await Promise.all(PROMPTS.map((p) => complete(plain, p)));
  for (const answer of reference) assert.is(answer.timings.draft_n, undefined, "a server without a draft model reports no drafts");
  const single = [];
  for (const p of PROMPTS) single.push(await complete(speculating, p));
  const together = await Promise.all(PROMPTS.slice(0, 2).map((p) => complete(speculating, p)));
  for (const [i, answer] of [...single, ...together].entries()) {
    assert.equal(answer.ids, reference[i % PROMPTS.length].ids, `answer ${i}`);
    const t = answer.timings;
    assert.is(t.predicted_n, MAX_TOKENS);
    // Every step drafts min(DRAFT_MAX, room): at least one draft per step, and some kept, some not, with this draft.
    assert.ok(t.draft_n! > 0 && t.draft_n_accepted! > 0 && t.draft_n_accepted! < t.draft_n!, `answer ${i}: drafted ${t.draft_n}, kept ${t.draft_n_accepted}`);
    assert.is(t.draft_accepted_positions!.length, t.draft_n_accepted);
    // The first token comes from the prompt's prefill, never from a draft.
    assert.ok(t.draft_accepted_positions!.every((p) => p > 0 && p < MAX_TOKENS));
  }
  const after = await draftCounters(speculating);
  const all = [...single, ...together];
  assert.is(after.drafted - before.drafted, all.reduce((sum, a) => sum + a.timings.draft_n!, 0));
  assert.is(after.accepted - before.accepted, all.reduce((sum, a) => sum + a.timings.draft_n_accepted!, 0));
});

test("a sampling request runs plain on a speculating server (no drafts) and its seed draws what it draws without speculation, alone and beside a speculating request; /v1/models reports the draft model", async () => {
  const before = await draftCounters(speculating);
  const sampled = await complete(speculating, PROMPTS[0], { temperature: 0.8, seed: 7 });
  assert.is(sampled.ids.length, MAX_TOKENS);
  assert.is(sampled.timings.draft_n, undefined);
  assert.equal(await draftCounters(speculating), before);
  const withoutDraft = await complete(plain, PROMPTS[0], { temperature: 0.8, seed: 7 });
  assert.equal(sampled.ids, withoutDraft.ids, "one seed, with and without a draft model");
  const [beside, greedy] = await Promise.all([complete(speculating, PROMPTS[0], { temperature: 0.8, seed: 7 }), complete(speculating, PROMPTS[1])]);
  assert.ok(greedy.timings.draft_n! > 0, "the greedy request beside it speculated");
  assert.equal(beside.ids, withoutDraft.ids, "one seed, beside a speculating request");
  const models = JSON.parse((await httpCall(`${speculating.baseUrl}/v1/models`)).text) as { data: { settings: Record<string, unknown> }[] };
  assert.is(models.data[0].settings.draft_model, "tiny-random-draft.v2.F32.gguf");
  assert.is(models.data[0].settings.draft_max, DRAFT_MAX);
});

test("the dialect probe finds speculativeGreedy on the server started with a draft model only", async () => {
  const withDraft = await openHttpSut(speculating.baseUrl, { label: "speculating" });
  assert.is(withDraft.dialects.found.speculativeGreedy, "openai");
  const without = await openHttpSut(plain.baseUrl, { label: "plain" });
  assert.is(without.dialects.found.speculativeGreedy, undefined);
  assert.match(without.dialects.missing.speculativeGreedy ?? "", /openai: no token drafted in 8: the server does not speculate/);
});

test("gemma4 (a sliding window) drafted by its own Q4_K: drafts rejected and kept, and every answer the plain server's (up to a near tie), alone and four at once", async () => {
  const target = (await resolveModel("gemma4-tiny:F32")).path;
  // Batch 64: the window cache is then small enough that verification batches take cells that left the window.
  const options = { slots: 4, queue: 4, contextSize: 256, threads: 1, flashAttention: false, kvCacheType: "F32" as const, batchSize: 64, bootTimeoutS: 120 };
  const [windowPlain, windowSpeculating] = await Promise.all([
    startManagedServer({ ...options, modelPath: target }),
    startManagedServer({ ...options, modelPath: target, draftModel: (await resolveModel("gemma4-tiny:Q4_K")).path, draftMax: DRAFT_MAX }),
  ]);
  try {
    const prompts = [...PROMPTS, idRun(30, 45, 5)];
    const single = [];
    for (const p of prompts) single.push(await complete(windowSpeculating, p));
    const together = await Promise.all(prompts.map((p) => complete(windowSpeculating, p)));
    // gemma4-tiny computes a token in a batch of several ~1e-3 nats from alone: a verification batch may take a near tie the other way (docs/speculative.md).
    for (const [i, answer] of [...single, ...together].entries()) {
      const departure = await departureFrom(windowPlain.baseUrl, { prompt: prompts[i % prompts.length], temperature: 0, max_tokens: MAX_TOKENS, ignore_eos: true }, answer.ids);
      assert.ok(departure === undefined || nearTie(departure.gap), `answer ${i} leaves the plain server's at token ${departure?.at} (top-2 gap ${departure?.gap} nats)`);
    }
    const drafted = single.reduce((sum, a) => sum + a.timings.draft_n!, 0);
    const accepted = single.reduce((sum, a) => sum + a.timings.draft_n_accepted!, 0);
    assert.ok(accepted > 0 && accepted < drafted, `kept ${accepted} of ${drafted}: some rejections to roll back, some drafts kept`);
  } finally {
    await stopManagedServer(windowPlain);
    await stopManagedServer(windowSpeculating);
  }
});

test("a draft model of another vocabulary, and --draft-max without --draft-model, are refused: exit 2 naming the flag", () => {
  const other = bench(["serve", "--model", "tiny-random:F32", "--draft-model", "tiny-random-swapped-vocab:F32", "--unvalidated", "--port", "0"]);
  assert.is(other.status, 2, other.stderr);
  assert.match(other.stderr, /tiny-random-swapped-vocab\.v2\.F32\.gguf: --draft-model: the draft model's tokenizer is not the target's .*\(fix: draft with a model of the same vocabulary/);
  const lone = bench(["serve", "--model", "tiny-random:F32", "--draft-max", "3", "--unvalidated", "--port", "0"]);
  assert.is(lone.status, 2, lone.stderr);
  assert.match(lone.stderr, /--draft-max: --draft-max without --draft-model: nothing would draft/);
});

test.run();
