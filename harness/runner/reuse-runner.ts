import { performance } from "node:perf_hooks";
import { BenchError } from "../errors.js";
import { countersDisagree, efficacyOutcome, type ReuseMeasurement } from "../reuse/efficacy.js";
import { buildScenario, chatTurns, reusableTokens, scenarioShapes, type Scenario, type ScenarioShape } from "../reuse/scenarios.js";
import { scoreChat, scoreScenario, type FinalPair, type ScenarioScore } from "../reuse/score.js";
import { resolveSplitPoints, type SplitUnits } from "../reuse/split-points.js";
import { compareWithReference, promptKey, type AnswersByPrompt } from "../reuse/prefill-reference.js";
import type { CellRecord } from "../results/types.js";
import type { ReuseArm, ReuseSuite } from "../suites/reuse-suite.js";
import { checkGreedyAnswer } from "../sut/answer-shape.js";
import { hasCapability, type CachedGreedyAnswer, type SystemUnderTest, type TokenId } from "../sut/types.js";
import { endsTheSut } from "../sut/with-timeout.js";
import { ErrorsInCells, makeCell, runCheck, type ArmScope, type CheckOutcome } from "./check.js";

export interface ReuseArmContext extends ArmScope {
  readonly suite: ReuseSuite;
  readonly arm: ReuseArm;
  /** The arm's ubatch and the model's sliding window, which split points are written in. */
  readonly units: SplitUnits;
  /** Filled with this arm's answers, for arms that name it their `prefill_reference`. */
  readonly answers: AnswersByPrompt;
  /** The answers of the arm this one names as `prefill_reference`; undefined when that arm did not run. */
  readonly referenceAnswers: AnswersByPrompt | undefined;
}

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
class RejectedAnswer extends Error {}

interface ScenarioRun {
  readonly score: ScenarioScore;
  /** The id-level answers (none for chat), for arms that take this one as their prefill reference. */
  readonly pairs: FinalPair[];
  readonly measurements: ReuseMeasurement[];
}

/**
 * Runs one scenario: warm the cache, (slot-restore) save the slot, evict it and restore it, then
 * ask each final prompt with the cache on — together, for the concurrent scenario — and then cold.
 */
async function runScenario(context: ReuseArmContext, scenario: Scenario): Promise<ScenarioRun> {
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
async function runChatScenario(context: ReuseArmContext, shape: ScenarioShape): Promise<ScenarioRun> {
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
function efficacyNote(measurements: readonly ReuseMeasurement[]): string {
  const sum = (pick: (m: ReuseMeasurement) => number) => measurements.reduce((s, m) => s + pick(m), 0);
  const cached = measurements.every((m) => m.cached !== undefined) ? String(sum((m) => m.cached!)) : "?";
  return `cached ${cached}/${sum((m) => m.reusable)}, hit ${sum((m) => m.hitMs).toFixed(0)} ms vs cold ${sum((m) => m.coldMs).toFixed(0)} ms`;
}

/**
 * Runs the reuse scenarios of one arm: `reuse` holds every scenario's last answers, served from the
 * server's cache, to the same requests served cold; `reuse_efficacy` measures what the server says
 * it reused against what was reusable (required where the arm declares `expect_reuse`).
 */
export async function runReuseArm(context: ReuseArmContext): Promise<{ summaryLine: string | undefined }> {
  const { suite, arm, sut } = context;
  const measurements: ReuseMeasurement[] = [];
  const lines: string[] = [];
  const countersBefore = await sut.promptCounters?.().catch(() => undefined);
  await runCheck(context, "reuse", "required", ["tokenize", "cachedGreedy"], async (gate): Promise<CheckOutcome> => {
    const { points, notApplicable } = resolveSplitPoints(suite.split_points, context.units, suite.prompt_tokens, suite.path);
    const shapes = scenarioShapes(suite.scenarios, points);
    const [otherWithBos] = await sut.tokenize!([suite.other_text]);
    const other = otherWithBos.slice(1);
    const bases = await sut.tokenize!(shapes.map((shape) => `${shape.tag} ${suite.text}`));
    // Built before any request: a text too short for its scenarios is the suite's error, found at once.
    const scenarios = shapes.map((shape, i) => shape.kind === "multi-turn-chat" ? undefined : buildScenario(shape, bases[i], other, suite));
    let identical = 0;
    let withLogprobs = 0;
    let failed = 0;
    let errored = 0;
    const skipped: string[] = [];
    let stoppedBy: string | undefined;
    for (const [index, shape] of shapes.entries()) {
      if (context.signal.aborted) break;
      const scenario = scenarios[index];
      const label = scenario?.label ?? shape.kind;
      await context.emit({ kind: "progress", message: `${suite.name} · ${arm.label} · ${label}` });
      const where = `${label}, prompt "${shape.tag} ${suite.text.slice(0, 24)}…"${scenario === undefined ? " (chat)" : ` (${scenario.warm.length}-token warm request)`}`;
      const cell = (fields: Pick<CellRecord, "status" | "detail"> & Partial<CellRecord>) => makeCell(context, "reuse", gate, { prompt: index, prompt_class: label, ...fields });
      const lacking = scenario === undefined ? (hasCapability(sut, "cachedChat") ? undefined : { what: "chat completions", why: sut.unsupported?.cachedChat })
        : scenario.evictor !== undefined && !hasCapability(sut, "slotAction") ? { what: "slot save/restore", why: sut.unsupported?.slotAction } : undefined;
      if (lacking !== undefined) {
        const reason = `${label}: SKIPPED — the server offers no ${lacking.what} (${lacking.why ?? "no dialect has it"})`;
        skipped.push(label);
        lines.push(`  SKIP ${reason}`);
        await context.emit({ kind: "cells", cells: [cell({ status: "skip", detail: reason })] });
        continue;
      }
      try {
        const run = scenario === undefined ? await runChatScenario(context, shape) : await runScenario(context, scenario);
        measurements.push(...run.measurements);
        for (const pair of run.pairs) context.answers.set(promptKey(pair.final), { label, cold: pair.cold.ids, hit: pair.hit.ids });
        const score = run.score;
        const note = efficacyNote(run.measurements);
        if (score.status === "not-cold") {
          errored++;
          lines.push(`  ERR  ${label}: ${score.why}`);
          await context.emit({ kind: "cells", cells: [cell({ status: "error", detail: `${where}: ${score.why}` })] });
        } else if (score.status === "pass") {
          identical++;
          if (score.bounds.length > 0) withLogprobs++;
          lines.push(`  PASS ${label}: identical to cold; ${note}`);
          await context.emit({ kind: "cells", cells: [cell({ status: "pass", detail: `${label}: ${run.measurements.length} answer(s) identical to cold${score.bounds.length === 0 ? "" : ", log-probs within bounds"}; ${note}` })] });
        } else {
          failed++;
          const d = score.divergence;
          lines.push(`  FAIL ${label}: ${score.why}`);
          await context.emit({ kind: "cells", cells: [cell({
            status: "fail", position: d?.position ?? null, expected_id: d?.coldId ?? null, observed_id: d?.hitId ?? null,
            detail: `${where}: the cache-on answer differs from cold: ${score.why}; ${note}; reproduce: ${context.reproduce}`,
          })] });
        }
      } catch (error) {
        if (error instanceof BenchError && error.file !== undefined) throw error;
        const reason = error instanceof Error ? error.message : String(error);
        if (error instanceof RejectedAnswer) {
          failed++;
          lines.push(`  FAIL ${label}: ${reason}`);
          await context.emit({ kind: "cells", cells: [cell({ status: "fail", detail: `${where}: ${reason}; reproduce: ${context.reproduce}` })] });
          continue;
        }
        errored++;
        lines.push(`  ERR  ${label}: ${reason}`);
        await context.emit({ kind: "cells", cells: [cell({ status: "error", detail: `${where}: ${reason}` })] });
        if (endsTheSut(error)) {
          stoppedBy = reason;
          break;
        }
      }
    }
    if (errored > 0) throw new ErrorsInCells(`${errored} scenario(s) errored${stoppedBy === undefined ? "" : `; the others did not run: ${stoppedBy}`} (see their cells)`);
    const ran = identical + failed;
    if (ran === 0) return { status: "skip", reason: skipped.length > 0 ? `no scenario could run (${skipped.join(", ")})` : "the run was stopped before the first scenario" };
    const bounds = arm.distribution ?? suite.distribution;
    const notes = [
      ...(bounds === undefined || suite.top_k === undefined ? [] : [withLogprobs === identical ? "log-probs within bounds" : withLogprobs === 0 ? "log-probs not compared: the server gives none" : `log-probs held to bounds on ${withLogprobs}/${identical} (the server gives none on the others)`]),
      ...(skipped.length === 0 ? [] : [`${skipped.join(", ")} SKIPPED`]),
      ...(notApplicable.length === 0 ? [] : [`split points ${notApplicable.join(", ")} not applicable here (no sliding window, or past the prompt)`]),
    ];
    return {
      status: failed === 0 ? "pass" : "fail",
      summary: `${identical}/${ran} scenarios identical to cold${notes.length === 0 ? "" : ` (${notes.join("; ")})`}`,
      metrics: { scenarios: ran, identical, failed, skipped: skipped.length, ubatch: context.units.ubatch, window: context.units.window ?? null },
    };
  });
  await runCheck(context, "reuse_efficacy", arm.expect_reuse === undefined ? "informational" : "required", ["cachedGreedy"], async (gate) => {
    const countersAfter = await sut.promptCounters?.().catch(() => undefined);
    const outcome = efficacyOutcome(measurements, arm.expect_reuse, countersDisagree(countersBefore, countersAfter));
    const detail = outcome.status === "skip" ? outcome.reason : outcome.summary;
    lines.push(`  efficacy${outcome.status === "skip" ? " SKIPPED" : ""}: ${detail}`);
    await context.emit({ kind: "cells", cells: [makeCell(context, "reuse_efficacy", gate, { status: outcome.status, detail })] });
    return outcome;
  });
  await runCheck(context, "reuse_prefill", arm.prefill_reference === undefined ? undefined : "required", ["cachedGreedy"], async (gate) => {
    const outcome = prefillOutcome(context);
    const detail = outcome.status === "skip" ? outcome.reason : outcome.summary;
    lines.push(`  prefill${outcome.status === "skip" ? " SKIPPED" : ""}: ${detail}`);
    await context.emit({ kind: "cells", cells: [makeCell(context, "reuse_prefill", gate, { status: outcome.status, detail })] });
    return outcome;
  });
  return { summaryLine: lines.length === 0 ? undefined : [`${arm.label} reuse:`, ...lines].join("\n") };
}

/** Every `prefill_reference` names an arm listed before its own, on the same model (bad input otherwise, before any arm runs). */
export function assertPrefillReferences(suite: ReuseSuite): void {
  for (const arm of suite.arms.filter((a) => a.prefill_reference !== undefined)) {
    const reference = suite.arms.find((a) => a.label === arm.prefill_reference);
    if (reference === undefined || reference.model !== arm.model || suite.arms.indexOf(reference) > suite.arms.indexOf(arm)) {
      throw new BenchError(`arm "${arm.label}": prefill_reference "${arm.prefill_reference}" is not an earlier arm on ${arm.model}`, { file: suite.path, field: "prefill_reference", fix: "name an arm listed before this one, on the same model" });
    }
  }
}

/** This arm's answers against its prefill reference's: the same prompts prefilled in other chunks must get the same ids. */
function prefillOutcome(context: ReuseArmContext): CheckOutcome {
  const reference = context.arm.prefill_reference!;
  if (context.referenceAnswers === undefined) return { status: "skip", reason: `the reference arm "${reference}" did not run before this one in this run (run both: --arm "${reference}" --arm "${context.arm.label}")` };
  const { compared, differences } = compareWithReference(context.answers, context.referenceAnswers);
  if (compared === 0) return { status: "skip", reason: `no final prompt was asked by both this arm and "${reference}"` };
  const first = differences[0];
  return {
    status: differences.length === 0 ? "pass" : "fail",
    summary: `${compared - differences.length}/${compared} prompts answered as "${reference}" answers them (ubatch ${context.units.ubatch})${first === undefined ? "" : `; FAIL: ${first.label} ${first.which} answer diverges at generated position ${first.position}: reference ${first.referenceId ?? "(ended)"}, here ${first.observedId ?? "(ended)"}${differences.length > 1 ? ` (and ${differences.length - 1} more)` : ""}; reproduce: ${context.reproduce} --arm "${reference}"`}`,
    metrics: { compared, differing: differences.length, ubatch: context.units.ubatch },
  };
}
