/**
 * Where an answer departs from a reference server's greedy answer to the same request, and
 * whether only at a near tie: llama.cpp's numbers depend on how a batch is cut, so an answer
 * computed through other batches (a prompt-cache hit, a speculative verification batch) can take
 * the other side of a tie the reference took, without any state being wrong.
 */
import { httpCall } from "../sut/http-call.js";

/**
 * The parity suites' near-tie band: where the reference's top two tokens at the first differing
 * position lie within it, the answer took the other side of a near tie.
 */
export const NEAR_TIE_BAND_NATS = 0.5;

/** The first position where `ids` leaves the reference's answer, and the reference's top-2 gap there in nats (NaN where one answer only stops short of the other). */
export interface Departure {
  readonly at: number;
  readonly gap: number;
}

/** The reference server's greedy answer to `body` (a /v1/completions body), and at each of its tokens the gap between its top two log-probs. */
async function answerWithGaps(referenceUrl: string, body: Record<string, unknown>): Promise<{ readonly ids: readonly number[]; readonly gap: (at: number) => number }> {
  const response = await httpCall(`${referenceUrl}/v1/completions`, { body: { ...body, logprobs: 2 } });
  if (response.status !== 200) throw new Error(`${referenceUrl}: the reference server answered ${response.status}: ${response.text.slice(0, 200)}`);
  const choice = (JSON.parse(response.text) as { choices: { token_ids: number[]; logprobs: { top_logprobs: Record<string, number>[] } }[] }).choices[0];
  return {
    ids: choice.token_ids,
    gap: (at) => {
      const [first, second] = Object.values(choice.logprobs.top_logprobs[at] ?? {}).sort((x, y) => y - x);
      return first - second;
    },
  };
}

/** The reference server's answer to `body` against `ids`: undefined where they are the same. */
export async function departureFrom(referenceUrl: string, body: Record<string, unknown>, ids: readonly number[]): Promise<Departure | undefined> {
  const reference = await answerWithGaps(referenceUrl, body);
  const at = reference.ids.findIndex((id, i) => id !== ids[i]);
  if (at < 0 && reference.ids.length === ids.length) return undefined;
  // A shorter answer is never a tie taken the other way.
  if (at < 0) return { at: Math.min(reference.ids.length, ids.length), gap: NaN };
  return { at, gap: reference.gap(at) };
}

/** The gap between the reference server's top two log-probs for the token after `prompt` (a /v1/completions body's other fields in `body`). */
export async function nextTokenGap(referenceUrl: string, body: Record<string, unknown>): Promise<number> {
  return (await answerWithGaps(referenceUrl, { ...body, max_tokens: 1 })).gap(0);
}

/** Whether a top-2 gap (a departure's, or a rejected draft's) is a near tie, which could fall either way. */
export function nearTie(gap: number): boolean {
  return Number.isFinite(gap) && gap <= NEAR_TIE_BAND_NATS;
}
