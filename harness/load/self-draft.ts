/**
 * The self-draft workload: a speculating server whose draft model is its target must keep every
 * draft (the draft's greedy token is the target's), so any rejected draft is the draft's state out
 * of step with the target's. Conversations of two turns share a prompt prefix (the prompt cache
 * hits, restores from the host cache and cuts back beside speculating slots); several clients
 * send them at once; the second turn extends the first (prompt, answer, a few more tokens), so the
 * draft continues from the state it kept. Used by test/server-self-draft.test.ts and
 * scripts/bench-self-draft.ts.
 */
import { httpCall } from "../sut/http-call.js";
import { departureFrom, nearTie, nextTokenGap } from "./near-tie.js";

/**
 * A family's fixture, and whether its self-draft is held exactly. gemma4-tiny's numbers move with
 * how a batch is cut (log-probs up to ~4e-3 nats apart, docs/server-cache.md): a verification
 * batch of four tokens can then take the other side of a near tie that one-token decoding takes,
 * so there a draft may be rejected, and an answer leave the plain server's, at a near tie only
 * (measured: 2 drafts in 2,242 rejected, each at a near tie). The other families are held to every draft and every token.
 */
export interface SelfDraftFamily {
  readonly model: string;
  readonly exact: boolean;
}

export const SELF_DRAFT_FAMILIES: readonly SelfDraftFamily[] = [
  { model: "tiny-random:F32", exact: true },
  { model: "qwen35-tiny:F32", exact: true },
  { model: "qwen35moe-tiny:F32", exact: true },
  { model: "gemma4-tiny:F32", exact: false },
  { model: "nemotron-h-moe-tiny:F32", exact: true },
];

export interface SelfDraftShape {
  readonly conversations: number;
  /** Tokens every conversation's first prompt starts with. */
  readonly sharedPrefix: number;
  /** Tokens of each conversation's own after the prefix, and added again before its second turn. */
  readonly ownTokens: number;
  /** Greedy tokens asked per turn. */
  readonly maxTokens: number;
  /** The speculating server's `--draft-max`: how many drafts a step asks for where the request has room. */
  readonly draftMax: number;
}

/** One answered turn: its prompt, the ids and what the server reports having drafted, kept (and where) and reused. */
export interface SelfDraftAnswer {
  readonly prompt: readonly number[];
  readonly ids: readonly number[];
  readonly drafted: number;
  readonly accepted: number;
  /** The output positions whose token is a kept draft (`timings.draft_accepted_positions`). */
  readonly acceptedPositions: readonly number[];
  readonly cached: number;
}

/** A pass: every conversation's first turn, then every second turn, in conversation order. */
export interface SelfDraftPass {
  readonly first: readonly SelfDraftAnswer[];
  readonly second: readonly SelfDraftAnswer[];
}

/** Ids of no text in particular, inside every fixture's vocabulary (ids 20 to 116). */
const idRun = (length: number, first: number, step: number): number[] => Array.from({ length }, (_, i) => 20 + ((first + i * step) % 97));

/** Conversation c's first prompt: the shared prefix, then its own tokens. */
export function firstPrompt(shape: SelfDraftShape, c: number): number[] {
  return [...idRun(shape.sharedPrefix, 3, 7), ...idRun(shape.ownTokens, 11 * c, 3 + (c % 5))];
}

/** Conversation c's second prompt: its first prompt, the first answer, and tokens of its own again. */
export function secondPrompt(shape: SelfDraftShape, c: number, firstAnswer: readonly number[]): number[] {
  return [...firstPrompt(shape, c), ...firstAnswer, ...idRun(shape.ownTokens, 5 * c + 1, 2 + (c % 3))];
}

const greedyBody = (prompt: readonly number[], maxTokens: number) => ({ prompt, temperature: 0, max_tokens: maxTokens, ignore_eos: true });

/** One greedy completion through /v1/completions, with its `timings` (our server's and llama-server's draft counts) and usage. */
async function completeGreedy(baseUrl: string, prompt: readonly number[], maxTokens: number): Promise<SelfDraftAnswer> {
  const response = await httpCall(`${baseUrl}/v1/completions`, { body: greedyBody(prompt, maxTokens) });
  if (response.status !== 200) throw new Error(`${baseUrl}: /v1/completions answered ${response.status}: ${response.text.slice(0, 300)}`);
  const body = JSON.parse(response.text) as {
    choices: { token_ids: number[] }[];
    timings?: { draft_n?: number; draft_n_accepted?: number; draft_accepted_positions?: number[] };
    usage: { prompt_tokens_details?: { cached_tokens?: number } };
  };
  const timings = body.timings ?? {};
  return {
    prompt, ids: body.choices[0].token_ids, drafted: timings.draft_n ?? 0, accepted: timings.draft_n_accepted ?? 0,
    acceptedPositions: timings.draft_accepted_positions ?? [], cached: body.usage.prompt_tokens_details?.cached_tokens ?? 0,
  };
}

/** `count` requests, `clients` at a time, each client taking the next one when its last is answered. */
async function closedLoop<T>(count: number, clients: number, one: (index: number) => Promise<T>): Promise<T[]> {
  const out = new Array<T>(count);
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(clients, count) }, async () => {
    while (next < count) {
      const index = next++;
      out[index] = await one(index);
    }
  }));
  return out;
}

/**
 * One pass of the workload through a server. `betweenTurns` runs after every first turn is
 * answered and before any second turn is sent (the test collects garbage there).
 */
export async function selfDraftPass(baseUrl: string, shape: SelfDraftShape, clients: number, betweenTurns: () => Promise<void> = async () => undefined): Promise<SelfDraftPass> {
  const first = await closedLoop(shape.conversations, clients, (c) => completeGreedy(baseUrl, firstPrompt(shape, c), shape.maxTokens));
  await betweenTurns();
  const second = await closedLoop(shape.conversations, clients, (c) => completeGreedy(baseUrl, secondPrompt(shape, c, first[c].ids), shape.maxTokens));
  return { first, second };
}

export const answersOf = (pass: SelfDraftPass): readonly SelfDraftAnswer[] => [...pass.first, ...pass.second];

/** Each answer's kept and drafted counts, in request order. */
export const countsOf = (pass: SelfDraftPass): string => answersOf(pass).map((a) => `${a.accepted}/${a.drafted}`).join(" ");

/** Drafted and kept over a pass. */
export function passTotals(pass: SelfDraftPass): { readonly drafted: number; readonly accepted: number } {
  const all = answersOf(pass);
  return { drafted: all.reduce((sum, a) => sum + a.drafted, 0), accepted: all.reduce((sum, a) => sum + a.accepted, 0) };
}

/** A family's passes judged: what falls short of its bar, and what its bar forgave (a family not held exactly). */
export interface SelfDraftVerdict {
  readonly problems: readonly string[];
  readonly forgiven: readonly string[];
}

/**
 * The output positions where a step's drafts were rejected: the target's own token there ends a
 * step that kept fewer drafts than it asked for (draftMax, or fewer where max_tokens left less
 * room). Position 0 comes from the prompt; every later step is a speculative one.
 */
export function rejectedAt(answer: SelfDraftAnswer, shape: SelfDraftShape): number[] {
  const accepted = new Set(answer.acceptedPositions);
  const rejected: number[] = [];
  let kept = 0;
  for (let at = 1; at < answer.ids.length; at++) {
    if (accepted.has(at)) {
      kept++;
      continue;
    }
    const generatedBefore = at - kept;
    if (kept < Math.min(shape.draftMax, shape.maxTokens - generatedBefore - 1)) rejected.push(at);
    kept = 0;
  }
  return rejected;
}

/**
 * A family's passes against its bar. Every answer is held to the plain server's cold answer to its
 * prompt (`plainUrl`, cache bypassed): equal, or for a family not held exactly, apart only from a
 * near tie on. Every answer drafted; every draft kept and the same counts in every pass, or for a
 * family not held exactly, every rejected draft at a near tie of the plain server's (its top two
 * there within the band) — a draft state out of step loses drafts where the target is sure.
 */
export async function judgeSelfDraft(family: SelfDraftFamily, passes: readonly SelfDraftPass[], plainUrl: string, shape: SelfDraftShape): Promise<SelfDraftVerdict> {
  const problems: string[] = [];
  const forgiven: string[] = [];
  const file = (fault: boolean, line: string) => (fault ? problems : forgiven).push(line);
  const cold = (prompt: readonly number[], maxTokens: number) => ({ ...greedyBody(prompt, maxTokens), cache_prompt: false });
  for (const [p, pass] of passes.entries()) {
    for (const [i, answer] of answersOf(pass).entries()) {
      if (answer.drafted === 0) problems.push(`pass ${p}, request ${i}: nothing drafted`);
      const departure = await departureFrom(plainUrl, cold(answer.prompt, shape.maxTokens), answer.ids);
      if (departure !== undefined) file(family.exact || !nearTie(departure.gap), `pass ${p}, request ${i}: leaves the plain server's answer at token ${departure.at} (its top-2 gap there ${departure.gap.toFixed(4)} nats)`);
      const kept = `kept ${answer.accepted} of ${answer.drafted} drafts`;
      if (family.exact) {
        if (answer.accepted !== answer.drafted) problems.push(`pass ${p}, request ${i}: ${kept}`);
        continue;
      }
      const rejected = rejectedAt(answer, shape);
      if ((rejected.length > 0) !== (answer.accepted < answer.drafted)) problems.push(`pass ${p}, request ${i}: ${kept}, but its kept positions (${answer.acceptedPositions.join(", ")}) place ${rejected.length} rejections`);
      for (const at of rejected) {
        const gap = await nextTokenGap(plainUrl, cold([...answer.prompt, ...answer.ids.slice(0, at)], 1));
        file(!nearTie(gap), `pass ${p}, request ${i}: ${kept}, one rejected at token ${at} (the plain server's top-2 gap there ${gap.toFixed(4)} nats)`);
      }
    }
  }
  if (passes.some((pass) => countsOf(pass) !== countsOf(passes[0]))) file(family.exact, `per-request counts differ between passes: ${passes.map(countsOf).join(" | ")}`);
  return { problems, forgiven };
}
