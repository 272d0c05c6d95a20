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

/**
 * The reference server's greedy answer to `body` (a /v1/completions body; its top-2 log-probs are
 * asked here) against `ids`: undefined where they are the same.
 */
export async function departureFrom(referenceUrl: string, body: Record<string, unknown>, ids: readonly number[]): Promise<Departure | undefined> {
  const response = await httpCall(`${referenceUrl}/v1/completions`, { body: { ...body, logprobs: 2 } });
  if (response.status !== 200) throw new Error(`${referenceUrl}: the reference server answered ${response.status}: ${response.text.slice(0, 200)}`);
  const choice = (JSON.parse(response.text) as { choices: { token_ids: number[]; logprobs: { top_logprobs: Record<string, number>[] } }[] }).choices[0];
  const at = choice.token_ids.findIndex((id, i) => id !== ids[i]);
  if (at < 0 && choice.token_ids.length === ids.length) return undefined;
  // A shorter answer is never a tie taken the other way.
  if (at < 0) return { at: Math.min(choice.token_ids.length, ids.length), gap: NaN };
  const [first, second] = Object.values(choice.logprobs.top_logprobs[at] ?? {}).sort((x, y) => y - x);
  return { at, gap: first - second };
}

/** Whether a departure is only a near tie taken the other way. */
export function atNearTie(departure: Departure): boolean {
  return Number.isFinite(departure.gap) && departure.gap <= NEAR_TIE_BAND_NATS;
}
