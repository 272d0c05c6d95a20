import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { BenchError } from "../harness/errors.js";
import { countersDisagree, efficacyOutcome, type ReuseMeasurement } from "../harness/reuse/efficacy.js";
import { promptCountersOf } from "../harness/sut/http.js";
import { buildScenario, reusableTokens, scenarioShapes } from "../harness/reuse/scenarios.js";
import { scoreChat, scoreScenario, type FinalPair } from "../harness/reuse/score.js";
import { resolveSplitPoints } from "../harness/reuse/split-points.js";
import { compareWithReference, promptKey, type AnswersByPrompt } from "../harness/reuse/prefill-reference.js";
import { readGguf } from "../harness/gguf/read.js";
import { slidingWindowOf } from "../harness/gguf/sliding-window.js";
import { resolveModel } from "../harness/fixtures/registry.js";
import { assertPrefillReferences } from "../harness/runner/reuse-runner.js";
import type { ReuseSuite } from "../harness/suites/reuse-suite.js";
import { builtLlamaServer } from "../harness/sut/llama-server-binary.js";
import type { CachedGreedyAnswer, TopK } from "../harness/sut/types.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("reuse");
test.after(() => work.remove());

const answer = (ids: number[], extra: Partial<CachedGreedyAnswer> = {}): CachedGreedyAnswer => ({ ids, cachedTokens: undefined, promptMs: undefined, ...extra });
const row = (ids: number[], logprobs: number[]): TopK => ({ ids, logprobs });

// ---- pure scoring on constructed data ------------------------------------------------------------

test("efficacy: a server's cache reports are held to its own counters (FAKE report-hits-no-reuse breaks the identity)", () => {
  const exposition = (total: number, cached: number, evaluated: number) => ({ status: 200, text: `# HELP x\nbench_prompt_tokens_total ${total}\nbench_prompt_tokens_cached_total ${cached}\nbench_prompt_tokens_evaluated_total ${evaluated}\n` });
  const before = promptCountersOf(exposition(100, 10, 90));
  assert.equal(before, { total: 100, cached: 10, evaluated: 90 });
  assert.is(countersDisagree(before, promptCountersOf(exposition(400, 210, 190))), undefined, "every admitted token cached or evaluated");
  // Hits reported, everything prefilled again: 200 cached + 300 evaluated of 300 admitted.
  assert.match(countersDisagree(before, promptCountersOf(exposition(400, 210, 390))) ?? "", /admitted 300 prompt tokens, reports 200 taken from its cache and 300 evaluated/);
  assert.is(countersDisagree(undefined, before), undefined, "a server without the counters is not judged by them");
  assert.is(promptCountersOf({ status: 200, text: "llamacpp:prompt_tokens_total 5\n" }), undefined);
  const failing = efficacyOutcome([{ kind: "prefix", label: "prefix k=5", promptTokens: 10, reusable: 5, cached: 5, hitMs: 1, coldMs: 2, hitPromptMs: undefined, coldPromptMs: undefined }], { prefix: 1 }, "the counters disagree");
  assert.is(failing.status, "fail");
});

test("score: identical ids pass; a divergence is reported with its request, position and the two ids", () => {
  const same: FinalPair = { final: [1, 2, 3], hit: answer([7, 8, 9, 10]), cold: answer([7, 8, 9, 10]) };
  assert.is(scoreScenario([same], undefined).status, "pass");
  const parted: FinalPair = { final: [1, 2, 3], hit: answer([7, 8, 5, 10]), cold: answer([7, 8, 9, 10]) };
  const score = scoreScenario([same, parted], undefined);
  assert.is(score.status, "fail");
  if (score.status !== "fail") return;
  assert.equal(score.divergence, { request: 1, position: 2, coldId: 9, hitId: 5 });
  assert.match(score.why, /request 1 diverges at generated position 2: cold 9, hit 5/);
  // A hit that ends early diverges where it ended.
  const short = scoreScenario([{ final: [1], hit: answer([7]), cold: answer([7, 8]) }], undefined);
  assert.equal(short.status === "fail" ? short.divergence : undefined, { request: 0, position: 1, coldId: 8, hitId: null });
});

test("score: a cold answer that reports cached tokens was not cold, and is never scored as a pass", () => {
  const score = scoreScenario([{ final: [1, 2], hit: answer([3]), cold: answer([3], { cachedTokens: 1 }) }], undefined);
  assert.is(score.status, "not-cold");
  assert.match(score.status === "not-cold" ? score.why : "", /reports 1 cached prompt tokens/);
});

test("score: same ids but hit log-probs past the bounds fail on the bound; within them pass; no top-k, no bound tested", () => {
  const cold = answer([4, 6], { topK: [row([4, 5], [-0.1, -2.4]), row([6, 2], [-0.2, -1.8])] });
  const close = answer([4, 6], { topK: [row([4, 5], [-0.1, -2.4]), row([6, 2], [-0.2, -1.8])] });
  const far = answer([4, 6], { topK: [row([4, 5], [-0.6, -0.8]), row([6, 2], [-0.2, -1.8])] });
  const bounds = { max_kld_mean: 1e-6 };
  const pass = scoreScenario([{ final: [1], hit: close, cold }], bounds);
  assert.is(pass.status, "pass");
  assert.is(pass.status === "pass" ? pass.bounds.length : -1, 1);
  const fail = scoreScenario([{ final: [1], hit: far, cold }], bounds);
  assert.is(fail.status, "fail");
  assert.is(fail.status === "fail" ? fail.divergence : "x", undefined);
  assert.match(fail.status === "fail" ? fail.why : "", /FAIL kld mean/);
  assert.equal(scoreScenario([{ final: [1], hit: answer([4, 6]), cold }], bounds), { status: "pass", bounds: [] });
});

test("score: chat answers are compared character for character, the first differing character named", () => {
  const chat = (text: string, cachedTokens?: number) => ({ text, promptTokens: 40, cachedTokens });
  assert.equal(scoreChat(chat("hello there"), chat("hello there")), { status: "pass", bounds: [] });
  const parted = scoreChat(chat("hello where"), chat("hello there"));
  assert.match(parted.status === "fail" ? parted.why : "", /diverges at character 6: cold "hello there", hit "hello where"/);
  assert.is(scoreChat(chat("a"), chat("a", 3)).status, "not-cold");
});

test("split points: N, ubatch and window with factor and offset; window on a model without one is not applicable; out of range is bad input naming the field", () => {
  const { points, notApplicable } = resolveSplitPoints(["5", "ubatch", "ubatch+1", "2*ubatch+3", "window", "window-1"], { ubatch: 64, window: undefined }, 160, "suite.json");
  assert.equal(points.map((p) => p.k), [5, 64, 65, 131]);
  assert.equal(notApplicable, ["window", "window-1"]);
  assert.equal(resolveSplitPoints(["window", "window+1", "16"], { ubatch: 64, window: 16 }, 160, "suite.json").points.map((p) => p.k), [16, 17]);
  // An arm that prefills whole prompts has no ubatch edge inside them.
  assert.equal(resolveSplitPoints(["3*ubatch", "7"], { ubatch: 64, window: undefined }, 160, "suite.json"), { points: [{ expression: "7", k: 7 }], notApplicable: ["3*ubatch (192)"] });
  assert.throws(() => resolveSplitPoints(["200"], { ubatch: 64, window: undefined }, 160, "suite.json"), (e: Error) => e instanceof BenchError && e.field === "split_points" && /200 tokens here, outside 1\.\.159/.test(e.message));
});

test("scenarios: divergence shares exactly k tokens; multi-turn resends prompt + answer + new text; reusable is the common prefix less the last token", () => {
  const suite = { prompt_tokens: 10, turn_tokens: 3, concurrency: 4, path: "suite.json" };
  const base = [1, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20];
  const other = Array.from({ length: 40 }, (_, i) => 100 + i);
  const [divergence, multiTurn, concurrent] = scenarioShapes(["divergence", "multi-turn", "concurrent"], [{ expression: "ubatch", k: 4 }]);
  const d = buildScenario(divergence, base, other, suite);
  assert.is(d.label, "divergence k=4 (ubatch)");
  const [final] = d.finals([50, 51]);
  assert.equal(final, [1, 10, 11, 12, 100, 101, 102, 103, 104, 105]);
  assert.is(reusableTokens(d.warm, [50, 51], final), 4);
  const m = buildScenario(multiTurn, base, other, suite);
  const [turn] = m.finals([50, 51]);
  assert.equal(turn, [...base.slice(0, 10), 50, 51, 100, 101, 102]);
  // The answer's last token (51) was sampled, never evaluated into the cache.
  assert.is(reusableTokens(m.warm, [50, 51], turn), 11);
  // The whole prompt cached: the last token must still be evaluated.
  assert.is(reusableTokens([1, 2, 3], [4], [1, 2, 3]), 2);
  const c = buildScenario(concurrent, base, other, suite);
  const finals = c.finals([]);
  assert.is(finals.length, 4);
  assert.is(new Set(finals.map((f) => f.join())).size, 4, "each concurrent request has its own suffix");
  assert.throws(() => buildScenario(d, base.slice(0, 6), other, suite), (e: Error) => e instanceof BenchError && e.field === "text");
});

test("prefill reference: prompts both arms asked are compared, cold then hit; a difference names the scenario, answer and position", () => {
  const reference: AnswersByPrompt = new Map([[promptKey([1, 2, 3]), { label: "prefix k=5", cold: [4, 5, 6], hit: [4, 5, 6] }], [promptKey([1, 9]), { label: "multi-turn", cold: [7], hit: [7] }]]);
  const same: AnswersByPrompt = new Map([[promptKey([1, 2, 3]), { label: "prefix k=5", cold: [4, 5, 6], hit: [4, 5, 6] }], [promptKey([1, 8]), { label: "prefix k=1 (ubatch)", cold: [0], hit: [0] }]]);
  assert.equal(compareWithReference(same, reference), { compared: 1, differences: [] });
  const hitDiffers: AnswersByPrompt = new Map([[promptKey([1, 2, 3]), { label: "prefix k=5", cold: [4, 5, 6], hit: [4, 2, 6] }]]);
  assert.equal(compareWithReference(hitDiffers, reference).differences, [{ label: "prefix k=5", which: "hit", position: 1, referenceId: 5, observedId: 2 }]);
});

test("a prefill reference that is not an earlier arm on the same model is bad input naming the field", () => {
  const arm = (label: string, model: string, prefill_reference?: string) => ({ label, model, gate: "required" as const, ...(prefill_reference === undefined ? {} : { prefill_reference }) });
  const suite = (arms: ReturnType<typeof arm>[]) => ({ path: "suite.json", arms }) as unknown as ReuseSuite;
  assertPrefillReferences(suite([arm("a", "m"), arm("b", "m", "a")]));
  for (const arms of [[arm("b", "m", "a"), arm("a", "m")], [arm("a", "other"), arm("b", "m", "a")], [arm("b", "m", "nobody")]]) {
    assert.throws(() => assertPrefillReferences(suite(arms)), (e: Error) => e instanceof BenchError && e.field === "prefill_reference" && e.file === "suite.json");
  }
});

const measurement = (kind: ReuseMeasurement["kind"], cached: number | undefined, reusable: number, promptTokens = 100): ReuseMeasurement =>
  ({ kind, label: kind, promptTokens, reusable, cached, hitMs: 10, coldMs: 20, hitPromptMs: undefined, coldPromptMs: undefined });

test("efficacy: below the declared fraction fails naming the scenario and the figures; at it passes with metrics; no report is SKIPPED; more cached than the prompt holds fails", () => {
  const low = efficacyOutcome([measurement("prefix", 3, 5), measurement("multi-turn", 80, 80)], { prefix: 1 });
  assert.is(low.status, "fail");
  assert.match(low.status === "fail" ? low.summary : "", /prefix: reused 3\/5 = 0\.600 < declared 1/);
  const ok = efficacyOutcome([measurement("prefix", 5, 5), measurement("multi-turn", 40, 80)], { prefix: 1, "multi-turn": 0.5 });
  assert.is(ok.status, "pass");
  if (ok.status !== "pass") return;
  assert.is(ok.metrics.cached_prefix, 5);
  assert.is(ok.metrics.reuse_multi_turn, 0.5);
  assert.is(ok.metrics.hit_ms_prefix, 10);
  assert.is(ok.metrics.cold_ms_prefix, 20);
  assert.is(efficacyOutcome([measurement("prefix", undefined, 5)], { prefix: 1 }).status, "skip");
  const declaredNotRun = efficacyOutcome([measurement("prefix", 5, 5)], { divergence: 0.5 });
  assert.match(declaredNotRun.status === "fail" ? declaredNotRun.summary : "", /divergence: declared 0\.5, not run/);
  const lie = efficacyOutcome([measurement("prefix", 100, 99, 100)], undefined);
  assert.match(lie.status === "fail" ? lie.summary : "", /reports 100 cached of a 100-token prompt/);
});

test("sliding window: read from the GGUF (gemma4's fixture has one, llama's none)", async () => {
  assert.is(slidingWindowOf(readGguf((await resolveModel("gemma4-tiny:F32")).path)), 16);
  assert.is(slidingWindowOf(readGguf((await resolveModel("tiny-random:F32")).path)), undefined);
});

// ---- one real leg: llama-server through the reuse suite -----------------------------------------

// Not built here (scripts/build-llama-server.sh): counted as skipped, never as a pass; CI builds it and requires it.
const llamaServerRequired = builtLlamaServer() !== undefined || process.env.BENCH_REQUIRE_LLAMA_SERVER === "1";
(llamaServerRequired ? test : test.skip)("llama-server on gemma4 through the reuse suite: every scenario identical to cold, split at the window edge, and its cache_n measured against what was reusable", () => {
  const runs = join(work.path, "runs");
  const result = bench(["run", "--suite", "reuse", "--arm", "llama-server gemma4", "--runs-dir", runs, "--run-id", "gemma4"]);
  assert.is(result.status, 0, result.stdout + result.stderr);
  const summary = JSON.parse(readFileSync(join(runs, "gemma4", "summary.json"), "utf8")) as { verdicts: { check: string; status: string; metrics?: Record<string, number | null> }[] };
  const cells = readFileSync(join(runs, "gemma4", "cells.jsonl"), "utf8").trim().split("\n").map((line) => JSON.parse(line) as { check: string; status: string; prompt_class: string });
  const scenarios = cells.filter((c) => c.check === "reuse").map((c) => c.prompt_class);
  for (const label of ["prefix k=16 (window)", "prefix k=17 (window+1)", "prefix k=64 (ubatch)", "divergence k=131 (2*ubatch+3)", "multi-turn", "concurrent", "slot-restore"]) assert.ok(scenarios.includes(label), `${label} ran`);
  assert.ok(cells.filter((c) => c.check === "reuse").every((c) => c.status === "pass"));
  const efficacy = summary.verdicts.find((g) => g.check === "reuse_efficacy");
  assert.is(efficacy?.status, "pass");
  assert.ok((efficacy?.metrics?.cached_prefix ?? 0) > 0, "llama-server reports prefix hits (timings.cache_n)");
  assert.ok((efficacy?.metrics?.reusable_prefix ?? 0) > 0);
});

test.run();
