import { BenchError } from "../../../errors.js";
import { promptKey } from "../../../reuse/prefill-reference.js";
import { buildScenario, scenarioShapes, type Scenario, type ScenarioShape } from "../../../reuse/scenarios.js";
import { resolveSplitPoints } from "../../../reuse/split-points.js";
import type { CellRecord } from "../../../results/types.js";
import type { GateLevel } from "../../../suites/parity-suite.js";
import { hasCapability } from "../../../sut/types.js";
import { endsTheSut } from "../../../sut/with-timeout.js";
import { ErrorsInCells, makeCell, type CheckOutcome } from "../../check.js";
import type { ReuseArmState, ReuseCheck } from "./reuse-arm-state.js";
import { efficacyNote, RejectedAnswer, runChatScenario, runScenario } from "./scenario-run.js";

/** How one scenario ended, as the check counts it; "ended": an error after which the SUT is gone (the rest do not run). */
type ScenarioEnd = "identical" | "identical-with-logprobs" | "failed" | "errored" | "skipped" | { readonly ended: string };

/** Every scenario's last answers, served from the server's cache, held to the same requests served cold. */
export const reuseCheck: ReuseCheck<"reuse"> = {
  kind: "reuse",
  name: "reuse",
  needs: ["tokenize", "cachedGreedy"],
  level: () => "required",
  async run(state, gate): Promise<CheckOutcome> {
    const { context } = state;
    const { suite, sut } = context;
    const { points, notApplicable } = resolveSplitPoints(suite.split_points, context.units, suite.prompt_tokens, suite.path);
    const shapes = scenarioShapes(suite.scenarios, points);
    const [otherWithBos] = await sut.tokenize!([suite.other_text]);
    const other = otherWithBos.slice(1);
    const bases = await sut.tokenize!(shapes.map((shape) => `${shape.tag} ${suite.text}`));
    // Built before any request: a text too short for its scenarios is the suite's error, found at once.
    const scenarios = shapes.map((shape, i) => shape.kind === "multi-turn-chat" ? undefined : buildScenario(shape, bases[i], other, suite));
    const ends: ScenarioEnd[] = [];
    const skipped: string[] = [];
    let stoppedBy: string | undefined;
    for (const [index, shape] of shapes.entries()) {
      if (context.signal.aborted) break;
      const end = await askScenario(state, gate, index, shape, scenarios[index]);
      ends.push(end);
      if (end === "skipped") skipped.push(scenarios[index]?.label ?? shape.kind);
      if (typeof end === "object") {
        stoppedBy = end.ended;
        break;
      }
    }
    const count = (...which: ScenarioEnd[]) => ends.filter((end) => which.includes(end)).length;
    const errored = count("errored") + (stoppedBy === undefined ? 0 : 1);
    if (errored > 0) throw new ErrorsInCells(`${errored} scenario(s) errored${stoppedBy === undefined ? "" : `; the others did not run: ${stoppedBy}`} (see their cells)`);
    const identical = count("identical", "identical-with-logprobs");
    const withLogprobs = count("identical-with-logprobs");
    const failed = count("failed");
    const ran = identical + failed;
    if (ran === 0) return { status: "skip", reason: skipped.length > 0 ? `no scenario could run (${skipped.join(", ")})` : "the run was stopped before the first scenario" };
    const bounds = context.arm.distribution ?? suite.distribution;
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
  },
};

/** One scenario (a chat one when `scenario` is undefined): its cell, its line in the arm's summary, and how it ended. */
async function askScenario(state: ReuseArmState, gate: GateLevel, index: number, shape: ScenarioShape, scenario: Scenario | undefined): Promise<ScenarioEnd> {
  const { context, lines } = state;
  const { suite, sut } = context;
  const label = scenario?.label ?? shape.kind;
  await context.emit({ kind: "progress", message: `${suite.name} · ${context.arm.label} · ${label}` });
  const where = `${label}, prompt "${shape.tag} ${suite.text.slice(0, 24)}…"${scenario === undefined ? " (chat)" : ` (${scenario.warm.length}-token warm request)`}`;
  const record = (line: string, fields: Pick<CellRecord, "status" | "detail"> & Partial<CellRecord>) => {
    lines.push(line);
    return context.emit({ kind: "cells", cells: [makeCell(context, "reuse", gate, { prompt: index, prompt_class: label, ...fields })] });
  };
  const lacking = scenario === undefined ? (hasCapability(sut, "cachedChat") ? undefined : { what: "chat completions", why: sut.unsupported?.cachedChat })
    : scenario.evictor !== undefined && !hasCapability(sut, "slotAction") ? { what: "slot save/restore", why: sut.unsupported?.slotAction } : undefined;
  if (lacking !== undefined) {
    const reason = `${label}: SKIPPED — the server offers no ${lacking.what} (${lacking.why ?? "no dialect has it"})`;
    await record(`  SKIP ${reason}`, { status: "skip", detail: reason });
    return "skipped";
  }
  try {
    const run = scenario === undefined ? await runChatScenario(context, shape) : await runScenario(context, scenario);
    state.measurements.push(...run.measurements);
    for (const pair of run.pairs) context.answers.set(promptKey(pair.final), { label, cold: pair.cold.ids, hit: pair.hit.ids });
    const { score } = run;
    const note = efficacyNote(run.measurements);
    if (score.status === "not-cold") {
      await record(`  ERR  ${label}: ${score.why}`, { status: "error", detail: `${where}: ${score.why}` });
      return "errored";
    }
    if (score.status === "pass") {
      await record(`  PASS ${label}: identical to cold; ${note}`, { status: "pass", detail: `${label}: ${run.measurements.length} answer(s) identical to cold${score.bounds.length === 0 ? "" : ", log-probs within bounds"}; ${note}` });
      return score.bounds.length > 0 ? "identical-with-logprobs" : "identical";
    }
    const d = score.divergence;
    await record(`  FAIL ${label}: ${score.why}`, {
      status: "fail", position: d?.position ?? null, expected_id: d?.coldId ?? null, observed_id: d?.hitId ?? null,
      detail: `${where}: the cache-on answer differs from cold: ${score.why}; ${note}; reproduce: ${context.reproduce}`,
    });
    return "failed";
  } catch (error) {
    if (error instanceof BenchError && error.file !== undefined) throw error;
    const reason = error instanceof Error ? error.message : String(error);
    if (error instanceof RejectedAnswer) {
      await record(`  FAIL ${label}: ${reason}`, { status: "fail", detail: `${where}: ${reason}; reproduce: ${context.reproduce}` });
      return "failed";
    }
    await record(`  ERR  ${label}: ${reason}`, { status: "error", detail: `${where}: ${reason}` });
    return endsTheSut(error) ? { ended: reason } : "errored";
  }
}
