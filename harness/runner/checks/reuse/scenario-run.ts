import { performance } from "node:perf_hooks";
import type { ReuseMeasurement } from "../../../reuse/efficacy.js";
import { chatTurns, reusableTokens, type Scenario, type ScenarioShape } from "../../../reuse/scenarios.js";
import { scoreChat, scoreScenario, type FinalPair, type ScenarioScore } from "../../../reuse/score.js";
import { checkGreedyAnswer } from "../../../sut/answer-shape.js";
import type { CachedGreedyAnswer, SystemUnderTest, TokenId } from "../../../sut/types.js";
import type { ReuseArmContext } from "./reuse-arm-state.js";

/*
 * One reuse scenario run against a server: the requests that warm, evict and restore its cache,
 * the final prompts asked with the cache on and cold, each answer checked against its request.
 */

/** The file name slot-restore saves slot state under, in the server's slot directory (overwritten each run). */
const SLOT_FILE = "bench-reuse.slot";

/** One request with its answer checked against the request's shape and timed by the client (wall time of the whole request). */
async function ask(sut: SystemUnderTest, promptIds: readonly TokenId[], maxTokens: number, cachePrompt: boolean, slot: number | undefined, topK?: number): Promise<{ answer: CachedGreedyAnswer; ms: number }> {
  const started = performance.now();
  const answer = await sut.cachedGreedy!({ promptIds, maxTokens, cachePrompt, ...(slot === undefined ? {} : { slot }), ...(topK === undefined ? {} : { topK }) });
  const ms = performance.now() - started;
  const checked = checkGreedyAnswer({ promptIds, maxTokens }, answer.ids);
  if (!checked.ok) throw new RejectedAnswer(`${cachePrompt ? "cache-on" : "cold"} answer to a ${promptIds.length}-token prompt rejected: ${checked.reason}`);
  if (topK !== undefined && answer.topK !== undefined && answer.topK.length !== answer.ids.length) throw new RejectedAnswer(`${answer.topK.length} top-k rows for ${answer.ids.length} generated ids`);
  return { answer, ms };
}

/** An answer that breaks its request's shape: the scenario fails with the reason (not an error of the harness). */
export class RejectedAnswer extends Error {}

export interface ScenarioRun {
  readonly score: ScenarioScore;
  /** The id-level answers (none for chat), for arms that take this one as their prefill reference. */
  readonly pairs: FinalPair[];
  readonly measurements: ReuseMeasurement[];
}

/**
 * Runs one scenario: warm the cache, (slot-restore) save the slot, evict it and restore it, then
 * ask each final prompt with the cache on — together, for the concurrent scenario — and then cold.
 */
export async function runScenario(context: ReuseArmContext, scenario: Scenario): Promise<ScenarioRun> {
  const { sut, suite } = context;
  const T = suite.max_tokens;
  const warm = await ask(sut, scenario.warm, T, true, scenario.slot);
  if (scenario.evictor !== undefined) {
    await sut.slotAction!(scenario.slot ?? 0, "save", SLOT_FILE);
    await ask(sut, scenario.evictor, T, true, scenario.slot);
    await sut.slotAction!(scenario.slot ?? 0, "restore", SLOT_FILE);
  }
  const finals = scenario.finals(warm.answer.ids);
  const hitOne = (final: readonly TokenId[]) => ask(sut, final, T, true, scenario.slot, suite.top_k);
  const hits = scenario.together ? await Promise.all(finals.map(hitOne)) : await sequentially(finals, hitOne);
  // Cold after every hit: a cold request clears the slot it lands on, which must not be a hit's.
  const colds = await sequentially(finals, (final) => ask(sut, final, T, false, scenario.slot, suite.top_k));
  const pairs = finals.map((final, i) => ({ final, hit: hits[i].answer, cold: colds[i].answer }));
  return {
    score: scoreScenario(pairs, context.arm.distribution ?? suite.distribution),
    pairs,
    measurements: finals.map((final, i) => ({
      kind: scenario.kind, label: scenario.label, promptTokens: final.length, reusable: reusableTokens(scenario.warm, warm.answer.ids, final),
      cached: hits[i].answer.cachedTokens, hitMs: hits[i].ms, coldMs: colds[i].ms, hitPromptMs: hits[i].answer.promptMs, coldPromptMs: colds[i].answer.promptMs,
    })),
  };
}

/**
 * The multi-turn chat scenario: a first turn with the cache on, then the history with its answer
 * and a new user message, hit then cold. Chat answers are text: they are compared character for
 * character (the fixtures' vocabularies are character-level), and what was reusable is the first
 * turn's rendered prompt, as the server counts it.
 */
export async function runChatScenario(context: ReuseArmContext, shape: ScenarioShape): Promise<ScenarioRun> {
  const { sut, suite } = context;
  const turns = chatTurns(shape, suite);
  const first = await sut.cachedChat!({ messages: turns.first, maxTokens: suite.max_tokens, cachePrompt: true });
  const messages = turns.then(first.text);
  const timed = async (cachePrompt: boolean) => {
    const started = performance.now();
    const answer = await sut.cachedChat!({ messages, maxTokens: suite.max_tokens, cachePrompt });
    return { answer, ms: performance.now() - started };
  };
  const hit = await timed(true);
  const cold = await timed(false);
  const reusable = Math.min(first.promptTokens ?? 0, (hit.answer.promptTokens ?? Infinity) - 1);
  return {
    score: scoreChat(hit.answer, cold.answer),
    pairs: [],
    measurements: [{ kind: shape.kind, label: shape.kind, promptTokens: hit.answer.promptTokens, reusable, cached: hit.answer.cachedTokens, hitMs: hit.ms, coldMs: cold.ms, hitPromptMs: undefined, coldPromptMs: undefined }],
  };
}

async function sequentially<T, R>(items: readonly T[], one: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (const item of items) out.push(await one(item));
  return out;
}

/** `cached 63/63, 41 vs 57 ms` for a scenario's line. */
export function efficacyNote(measurements: readonly ReuseMeasurement[]): string {
  const sum = (pick: (m: ReuseMeasurement) => number) => measurements.reduce((s, m) => s + pick(m), 0);
  const cached = measurements.every((m) => m.cached !== undefined) ? String(sum((m) => m.cached!)) : "?";
  return `cached ${cached}/${sum((m) => m.reusable)}, hit ${sum((m) => m.hitMs).toFixed(0)} ms vs cold ${sum((m) => m.coldMs).toFixed(0)} ms`;
}
