import { checkGreedyAnswer } from "../../../sut/answer-shape.js";
import type { TimedGreedy } from "../../../sut/dialects/dialect.js";
import type { GreedyRequest } from "../../../sut/types.js";
import { firstDivergence, speculationFigures, sumCounts, type PassCounts } from "../../../speculative/compare.js";
import { makeCell } from "../../check.js";
import type { ServerGreedy, SpeculativeCheck } from "./speculative-arm-state.js";

interface Case {
  readonly prompt: number;
  readonly request: GreedyRequest;
}

/** A case's answer, or an error that names the case and the server (a reset connection alone says neither). */
async function answerOf(server: ServerGreedy, side: "plain" | "speculating", mode: string, c: Case): Promise<TimedGreedy> {
  try {
    return await server(c.request);
  } catch (error) {
    throw new Error(`prompt ${c.prompt} (${mode}, T=${c.request.maxTokens}): the ${side} server gave no answer: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}

const counts = (answer: TimedGreedy): PassCounts => ({ generated: answer.predictedN, generatingMs: answer.predictedMs, drafted: answer.draftN, accepted: answer.draftAccepted });

/** Whether the token at a position came from a kept draft, where the server says so. */
function provenanceAt(answer: TimedGreedy, position: number): string {
  if (answer.draftAcceptedPositions === undefined) return "the server does not say which positions came from accepted drafts";
  if (position >= answer.ids.length) return "the speculative answer had ended there";
  return answer.draftAcceptedPositions.includes(position)
    ? `the token at position ${position} was an accepted draft`
    : `the token at position ${position} was the target's own, no draft accepted there${answer.draftAcceptedPositions.includes(position - 1) ? " (the one before it was an accepted draft)" : ""}`;
}

/**
 * Asks every (prompt, length) case of the plain server one at a time (started for it, stopped
 * after, so it never shares the CPU with the timed passes), then of the speculating
 * server one at a time and `concurrency` at a time, and holds each speculative answer to the plain
 * one token for token: one cell per case and pass, failing at the first divergent position. The
 * figures (drafted, accepted, rate, tokens per target step, speed-up) come from the one-at-a-time
 * passes, whose generation times do not overlap. Nothing drafted and nothing divergent is SKIPPED:
 * the server did not speculate, so identity proved nothing about speculation.
 */
export const speculativeGreedyCheck: SpeculativeCheck<"speculative_greedy"> = {
  kind: "speculative",
  name: "speculative_greedy",
  needs: ["tokenize"],
  level: ({ context }) => context.gate,
  async run(state, gate) {
    const { context } = state;
    if ("refusal" in context.speculating) {
      // Its probe drafted nothing: holding its answers to plain greedy would prove nothing about speculation.
      const reason = `the server started with speculation did not speculate when probed: ${context.speculating.refusal}`;
      await context.emit({ kind: "cells", cells: [makeCell(context, "speculative_greedy", gate, { status: "skip", detail: reason })] });
      return { status: "skip", reason };
    }
    const speculating = await context.speculating.open();
    const indices = [...context.prompts.keys()];
    const ids = await context.sut.tokenize!([...context.prompts.values()]);
    const cases: Case[] = indices.flatMap((prompt, i) => context.maxTokens.map((maxTokens) => ({ prompt, request: { promptIds: ids[i], maxTokens } })));
    const plain = await context.withPlainServer(async (server) => {
      const answers: TimedGreedy[] = [];
      for (const c of cases) answers.push(await answerOf(server, "plain", "single", c));
      return answers;
    });
    for (const [i, answer] of plain.entries()) {
      const checked = checkGreedyAnswer(cases[i].request, answer.ids);
      // The plain server is the reference: an answer of the wrong shape leaves nothing to compare with.
      if (!checked.ok) throw new Error(`the plain server's answer to prompt ${cases[i].prompt} (T=${cases[i].request.maxTokens}) is malformed: ${checked.reason}`);
    }
    const single: TimedGreedy[] = [];
    for (const c of cases) single.push(await answerOf(speculating, "speculating", "single", c));
    const concurrent: TimedGreedy[] = [];
    for (let start = 0; start < cases.length; start += context.concurrency) {
      concurrent.push(...await Promise.all(cases.slice(start, start + context.concurrency).map((c) => answerOf(speculating, "speculating", `B=${context.concurrency}`, c))));
    }
    let divergent = 0;
    let rejected = 0;
    let firstBad: string | undefined;
    const passes = [{ mode: "single", answers: single }, { mode: `B=${context.concurrency}`, answers: concurrent }];
    for (const { mode, answers } of passes) {
      await context.emit({ kind: "cells", cells: answers.map((answer, i) => {
        const { prompt, request } = cases[i];
        const where = `prompt ${prompt} (${mode}, T=${request.maxTokens})`;
        const fields = { prompt, prompt_class: `${mode} T=${request.maxTokens}` };
        const selector = ` --prompt ${prompt}`;
        const checked = checkGreedyAnswer(request, answer.ids);
        if (!checked.ok) {
          rejected++;
          const detail = `${where}: the speculating server's answer is malformed: ${checked.reason}`;
          firstBad ??= detail;
          return makeCell(context, "speculative_greedy", gate, { ...fields, status: "fail", detail }, selector);
        }
        const divergence = firstDivergence(plain[i].ids, answer.ids);
        if (divergence === undefined) {
          return makeCell(context, "speculative_greedy", gate, { ...fields, status: "pass", detail: `${where}: ${answer.ids.length} ids identical to plain greedy; drafted ${answer.draftN}, accepted ${answer.draftAccepted}` }, selector);
        }
        divergent++;
        const detail = `${where}: speculation changed greedy output at position ${divergence.position}: plain ${divergence.expected ?? "(ended)"}, speculative ${divergence.observed ?? "(ended)"}; `
          + `this request drafted ${answer.draftN} and accepted ${answer.draftAccepted}; ${provenanceAt(answer, divergence.position)}`;
        firstBad ??= detail;
        return makeCell(context, "speculative_greedy", gate, {
          ...fields, status: "fail", position: divergence.position, expected_id: divergence.expected, observed_id: divergence.observed, detail,
        }, selector);
      }) });
    }
    const figures = speculationFigures(sumCounts(single.map(counts)), sumCounts(plain.map(counts)));
    const together = sumCounts(concurrent.map(counts));
    const answersCount = single.length + concurrent.length;
    const percent = (x: number | null) => (x === null ? "n/a" : `${(100 * x).toFixed(1)}%`);
    const fixed = (x: number | null, digits: number) => (x === null ? "n/a" : x.toFixed(digits));
    const figuresLine = `drafted ${figures.drafted}, accepted ${figures.accepted} (${percent(figures.acceptance_rate)}), ${fixed(figures.tokens_per_target_step, 2)} tokens per target step, `
      + `speed-up ${fixed(figures.speedup, 2)}× one at a time; at B=${context.concurrency} drafted ${together.drafted}, accepted ${together.accepted}`;
    const bad = divergent + rejected;
    state.summaryLine = `${context.arm.label} speculative greedy: ${answersCount - bad}/${answersCount} answers identical to plain greedy; ${figuresLine}`;
    if (bad === 0 && figures.drafted + together.drafted === 0) {
      const reason = `the server drafted no token in ${answersCount} answers: speculation was not exercised, so identity proves nothing about it`;
      await context.emit({ kind: "cells", cells: [makeCell(context, "speculative_greedy", gate, { status: "skip", detail: reason })] });
      return { status: "skip", reason };
    }
    return {
      status: bad === 0 ? "pass" : "fail",
      // A failure leads with its first case, so the position is in the line a reader sees first.
      summary: bad === 0 ? `${answersCount}/${answersCount} answers identical to plain greedy; ${figuresLine}`
        : `FAIL: ${divergent} of ${answersCount} answers diverge from plain greedy, ${rejected} malformed; first: ${firstBad}; ${figuresLine}`,
      metrics: {
        answers: answersCount, divergent, rejected, ...figures,
        concurrent_drafted: together.drafted, concurrent_accepted: together.accepted,
      },
    };
  },
};
