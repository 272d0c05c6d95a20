import { expectedDistribution } from "../../../sampling/convention.js";
import { sampled, type SampledAnswer } from "../../../sampling/sampling-wire.js";
import { SAMPLING_PARAMETERS, type SamplingParameter } from "../../../suites/sampling-suite.js";
import type { TokenId } from "../../../sut/types.js";
import { makeCell } from "../../check.js";
import type { SamplingArmContext, SamplingCheck } from "./sampling-arm-state.js";

const PLAIN = { temperature: 1, top_k: 0, top_p: 1, min_p: 0 };
/** Draws per case: a parameter ignored shows in far fewer (each case's own arithmetic below). */
const DRAWS = 60;
/** Seeds of the repeat cases, and their length. */
const SEEDS = [11, 12, 13, 14, 15, 16, 17, 18];
const LONG = 48;
const MIN_P = 0.3;
/** The least tail mass min_p must cut for its case to fail a server that ignores it: 60 draws then miss the tail with probability ≤ 0.85^60 < 1e-4. */
const MIN_TAIL = 0.15;

type Outcome = { readonly status: "pass" | "fail" | "skip"; readonly detail: string };

/** A 400 whose body names the parameter: refused as it should be where it is not implemented. */
function refusal(answer: SampledAnswer, parameter: string): Outcome | undefined {
  if (answer.ok) return undefined;
  if (answer.status === 400 && answer.body.includes(parameter)) return { status: "pass", detail: `refused with a 400 naming ${parameter}` };
  throw new Error(`${parameter}: HTTP ${answer.status} ${answer.body}`);
}

async function draws(context: SamplingArmContext, count: number, extra: Record<string, unknown>, setting = PLAIN): Promise<SampledAnswer> {
  const { prompts } = context;
  return sampled(context.server, { prompts: Array.from({ length: count }, () => prompts[0].ids), maxTokens: 1, setting, stream: false, extra });
}

/** Repeated tokens (length − distinct) summed over the seeds' long answers, with `extra` sent; or its refusal. */
async function repeats(context: SamplingArmContext, extra: Record<string, unknown>): Promise<number | SampledAnswer> {
  let total = 0;
  for (const seed of SEEDS) {
    const answer = await sampled(context.server, { prompts: [context.prompts[0].ids], maxTokens: LONG, setting: PLAIN, seed, stream: false, extra });
    if (!answer.ok) return answer;
    total += answer.choices[0].length - new Set(answer.choices[0]).size;
  }
  return total;
}

const PENALTY: Readonly<Record<"frequency_penalty" | "presence_penalty" | "repeat_penalty", number>> = { frequency_penalty: 1.5, presence_penalty: 1.5, repeat_penalty: 1.8 };

/** Each parameter's case: what it must do to the draws, or a 400 naming it. */
async function caseOf(context: SamplingArmContext, parameter: SamplingParameter, logprobs: Float64Array): Promise<Outcome> {
  const wire = context.samplingArm.wire;
  const ranked = Array.from(logprobs.keys()).filter((id) => logprobs[id] > -Infinity).sort((a, b) => logprobs[b] - logprobs[a]);
  const top = ranked[0];
  const rare = ranked[ranked.length - 1];
  const bias = (id: TokenId, value: number) => ({ logit_bias: wire === "openai" ? { [id]: value } : [[id, value]] });
  switch (parameter) {
    case "logit_bias": {
      const forced = await draws(context, DRAWS, bias(rare, 100));
      const refused = refusal(forced, "logit_bias");
      if (refused !== undefined) return refused;
      const forbidden = await draws(context, DRAWS, bias(top, -100));
      if (!forced.ok || !forbidden.ok) return { status: "fail", detail: "logit_bias answered once and refused once" };
      const notForced = forced.choices.filter(([id]) => id !== rare).length;
      const drawnAnyway = forbidden.choices.filter(([id]) => id === top).length;
      const pass = notForced === 0 && drawnAnyway === 0;
      return { status: pass ? "pass" : "fail", detail: `+100 on the least likely token ${rare}: ${DRAWS - notForced}/${DRAWS} draws it; -100 on the most likely ${top} (p ${Math.exp(logprobs[top]).toFixed(3)}): drawn ${drawnAnyway}/${DRAWS}` };
    }
    case "min_p": {
      const kept = expectedDistribution(logprobs, { ...PLAIN, min_p: MIN_P }, context.samplingArm.convention);
      const tail = ranked.filter((id) => kept.probabilities[id] === 0);
      const tailMass = tail.reduce((sum, id) => sum + Math.exp(logprobs[id]), 0);
      if (tailMass < MIN_TAIL) return { status: "skip", detail: `min_p ${MIN_P} cuts ${tailMass.toFixed(3)} of the mass at this prompt, too little to see it ignored` };
      const answer = await draws(context, DRAWS, {}, { ...PLAIN, min_p: MIN_P });
      const refused = refusal(answer, "min_p");
      if (refused !== undefined || !answer.ok) return refused!;
      const inTail = answer.choices.filter(([id]) => kept.probabilities[id] === 0).length;
      return { status: inTail === 0 ? "pass" : "fail", detail: `min_p ${MIN_P} cuts ${tail.length} tokens holding ${tailMass.toFixed(3)} of the mass: ${inTail}/${DRAWS} draws fell among them` };
    }
    case "n": {
      const answer = await sampled(context.server, { prompts: [context.prompts[0].ids], maxTokens: 1, setting: PLAIN, stream: false, extra: { n: 2 } }).catch((error: unknown) => error as Error);
      if (answer instanceof Error) return { status: "fail", detail: `n 2: ${answer.message}` };
      return refusal(answer, "n") ?? { status: "pass", detail: "n 2 returned 2 choices" };
    }
    default: {
      const without = await repeats(context, {});
      if (typeof without !== "number") throw new Error(`a plain sampled request was refused: HTTP ${(without as { status: number }).status}`);
      const withPenalty = await repeats(context, { [parameter]: PENALTY[parameter] });
      if (typeof withPenalty !== "number") return refusal(withPenalty, parameter)!;
      const detail = `${parameter} ${PENALTY[parameter]}: ${withPenalty} repeated tokens in ${SEEDS.length} answers of ${LONG}, against ${without} without it`;
      if (without === 0) return { status: "skip", detail: `${detail}: nothing repeats without it, so no penalty can show` };
      return { status: withPenalty < without ? "pass" : "fail", detail };
    }
  }
}

/**
 * Every sampling parameter the arm is held to is honoured or refused: logit_bias +100 forces a
 * token and -100 forbids one, min_p cuts the tail the convention says, the penalties lower
 * repeats in seeded long answers, n 2 returns two choices; or a 400 that names the parameter. A
 * parameter answered 200 with no effect fails. The parameters the arm does not list are named in
 * the summary, not asked.
 */
export const parametersCheck: SamplingCheck<"parameters"> = {
  kind: "sampling",
  name: "parameters",
  needs: ["tokenize"],
  level: ({ context }) => context.suite.checks.parameters,
  async run({ context }, gate) {
    const listed = context.samplingArm.parameters;
    const notAsked = SAMPLING_PARAMETERS.filter((p) => !listed.includes(p));
    if (listed.length === 0) return { status: "skip", reason: "the arm lists no parameter to hold" };
    const logprobs = await context.oracle(context.prompts[0].ids);
    const outcomes: { parameter: SamplingParameter; outcome: Outcome }[] = [];
    for (const parameter of listed) outcomes.push({ parameter, outcome: await caseOf(context, parameter, logprobs) });
    await context.emit({ kind: "cells", cells: outcomes.map(({ parameter, outcome }) => makeCell(context, "parameters", gate, { prompt: context.prompts[0].index, prompt_class: parameter, status: outcome.status, detail: `${parameter}: ${outcome.detail}` })) });
    const failed = outcomes.filter((o) => o.outcome.status === "fail");
    const tested = outcomes.filter((o) => o.outcome.status !== "skip");
    const unasked = notAsked.length === 0 ? "" : `; not asked (the arm does not list them): ${notAsked.join(", ")}`;
    if (tested.length === 0) return { status: "skip", reason: `no parameter case could fail: ${outcomes.map((o) => o.outcome.detail).join("; ")}` };
    return {
      status: failed.length === 0 ? "pass" : "fail",
      summary: failed.length === 0 ? `${tested.length}/${tested.length} parameters honoured or refused: ${tested.map((o) => `${o.parameter} (${o.outcome.detail})`).join("; ")}${unasked}`
        : `FAIL: ${failed.map((o) => o.parameter).join(", ")} accepted without their effect: ${failed.map((o) => `${o.parameter}: ${o.outcome.detail}`).join("; ")}${unasked}`,
      metrics: { parameters: tested.length, failed: failed.length, not_asked: notAsked.length },
    };
  },
};
