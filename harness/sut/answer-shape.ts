import { endsTheSut } from "./with-timeout.js";
import { RunnerReplacedError } from "./restarting-runner.js";
import type { GreedyRequest, KernelRequest, SystemUnderTest, TeacherForcedRequest, TokenId, TopK } from "./types.js";

/**
 * Every answer a SUT gives is checked against the request it answers before any scorer sees it:
 * a short, empty or malformed answer is that prompt's failure with the reason, never a quiet pass
 * (an empty sequence used to classify STRICT-by-omission). One place, for every adapter.
 */
export type Checked<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly reason: string; readonly errored?: true };

/** A top-k may sum to a little over 1 from float32 rounding; more than this is not a distribution. */
export const LOGSUMEXP_TOLERANCE_NATS = 1e-3;

const bad = (reason: string): Checked<never> => ({ ok: false, reason });

function describeId(id: unknown, vocabSize: number | undefined): string | undefined {
  if (!Number.isInteger(id)) return `${JSON.stringify(id)} is not an integer token id`;
  if ((id as number) < 0 || (vocabSize !== undefined && (id as number) >= vocabSize)) return `id ${String(id)} is outside the vocabulary (0..${vocabSize === undefined ? "" : vocabSize - 1})`;
  return undefined;
}

/** Exactly `maxTokens` ids in the vocabulary, or fewer ending on an end-of-sequence id the request allows. */
export function checkGreedyAnswer(request: GreedyRequest, answer: unknown, vocabSize?: number): Checked<TokenId[]> {
  if (!Array.isArray(answer)) return bad(`the answer is ${JSON.stringify(answer) ?? "missing"}, not a list of ids`);
  for (const [position, id] of answer.entries()) {
    const problem = describeId(id, vocabSize);
    if (problem !== undefined) return bad(`at position ${position}: ${problem}`);
  }
  const ids = answer as TokenId[];
  if (ids.length > request.maxTokens) return bad(`${ids.length} ids, the request asked for max_tokens ${request.maxTokens}`);
  if (ids.length < request.maxTokens) {
    const allowedEnd = ids.length > 0 && (request.eosIds ?? []).includes(ids[ids.length - 1]);
    if (!allowedEnd) {
      return bad(ids.length === 0
        ? `an empty sequence, the request asked for ${request.maxTokens} ids`
        : `${ids.length} of ${request.maxTokens} ids, and it does not end on an end-of-sequence id the request allows`);
    }
  }
  return { ok: true, value: ids };
}

function logSumExp(values: readonly number[]): number {
  const top = Math.max(...values);
  return top + Math.log(values.reduce((sum, v) => sum + Math.exp(v - top), 0));
}

/**
 * One top-k row per continuation token; each row `k` distinct ids in the vocabulary with `k`
 * finite log-probs, ≤ 0, sorted descending, whose probabilities sum to at most 1 (with tolerance).
 * All-zero log-probs (probability 1 for every id) fail here instead of scoring top-1 100%.
 */
export function checkTeacherForcedAnswer(request: TeacherForcedRequest, answer: unknown, vocabSize?: number): Checked<TopK[]> {
  if (!Array.isArray(answer)) return bad(`the answer is ${JSON.stringify(answer) ?? "missing"}, not a list of top-k rows`);
  const expectedRows = request.continuationIds.length;
  if (answer.length !== expectedRows) return bad(`${answer.length} top-k rows, the request has ${expectedRows} continuation tokens`);
  const k = vocabSize === undefined ? request.k : Math.min(request.k, vocabSize);
  for (const [position, row] of (answer as unknown[]).entries()) {
    const at = `position ${position}`;
    const { ids, logprobs } = (row ?? {}) as { ids?: unknown; logprobs?: unknown };
    if (!Array.isArray(ids) || !Array.isArray(logprobs)) return bad(`${at}: a row needs ids and logprobs lists`);
    if (ids.length !== k || logprobs.length !== k) return bad(`${at}: ${ids.length} ids and ${logprobs.length} log-probs, the request asked for top-${k}`);
    for (const id of ids) {
      const problem = describeId(id, vocabSize);
      if (problem !== undefined) return bad(`${at}: ${problem}`);
    }
    if (new Set(ids).size !== ids.length) return bad(`${at}: the top-k repeats an id`);
    const index = logprobs.findIndex((p) => typeof p !== "number" || !Number.isFinite(p));
    if (index >= 0) return bad(`${at}: log-prob ${String(logprobs[index])} of id ${String(ids[index])} is not finite`);
    const values = logprobs as number[];
    const positive = values.findIndex((p) => p > 0);
    if (positive >= 0) return bad(`${at}: log-prob ${values[positive]} of id ${String(ids[positive])} is above 0`);
    const unsorted = values.findIndex((p, i) => i > 0 && p > values[i - 1]);
    if (unsorted >= 0) return bad(`${at}: log-probs are not sorted descending (rank ${unsorted})`);
    const total = logSumExp(values);
    if (total > LOGSUMEXP_TOLERANCE_NATS) return bad(`${at}: the top-${k} probabilities sum to ${Math.exp(total).toPrecision(4)} (> 1): not log-softmax values`);
  }
  return { ok: true, value: answer as TopK[] };
}

/** One output per requested output, in its order, with its name and exactly the bytes its shape takes. */
export function checkKernelAnswer(request: KernelRequest, answer: unknown): Checked<Uint8Array[]> {
  const names = request.outputs.map((o) => o.name).join(", ");
  if (!Array.isArray(answer) || answer.length !== request.outputs.length) {
    return bad(`the answer lists ${Array.isArray(answer) ? answer.length : "no"} output tensors, the request has ${request.outputs.length} (${names})`);
  }
  const outputs: Uint8Array[] = [];
  for (const [i, want] of request.outputs.entries()) {
    const got = answer[i] as { name?: unknown; data?: unknown } | null;
    if (got?.name !== want.name || !(got.data instanceof Uint8Array)) return bad(`outputs[${i}] must be {name: "${want.name}", data: base64}`);
    if (got.data.byteLength !== want.data.byteLength) return bad(`output ${want.name} has ${got.data.byteLength} bytes, its shape [${want.shape.join(", ")}] of ${want.dtype} takes ${want.data.byteLength}`);
    outputs.push(got.data);
  }
  return { ok: true, value: outputs };
}

function reasonOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Sends a batch and checks each answer against its request. A wrong answer count is the SUT's
 * protocol breach (thrown, naming the method). With `splitOnError` (requests evaluated alone
 * anyway), a batch that errors while the SUT is still there (or was replaced after a timeout) is
 * asked again one request at a time, so an error belongs to the prompt it happened on and the other
 * prompts still get their answers.
 * A batched call is never split: answers asked one by one would prove nothing about batching.
 */
async function ask<Req, Ans>(
  sut: SystemUnderTest,
  method: string,
  send: (requests: readonly Req[]) => Promise<unknown[]>,
  requests: readonly Req[],
  check: (request: Req, answer: unknown) => Checked<Ans>,
  splitOnError: boolean,
): Promise<Checked<Ans>[]> {
  let answers: unknown[];
  try {
    answers = await send(requests);
  } catch (error) {
    if (!splitOnError || endsTheSut(error)) throw error;
    // A runner that timed out on this request alone was replaced: no answer was given, so the prompt is an error, not a wrong answer.
    if (requests.length === 1) return [error instanceof RunnerReplacedError ? { ok: false, reason: reasonOf(error), errored: true } : bad(reasonOf(error))];
    const alone: Checked<Ans>[] = [];
    for (const request of requests) alone.push(...(await ask(sut, method, send, [request], check, true)));
    return alone;
  }
  if (!Array.isArray(answers) || answers.length !== requests.length) {
    throw new Error(`${sut.label} ${method}: ${Array.isArray(answers) ? answers.length : "no"} answers for ${requests.length} requests`);
  }
  return requests.map((request, i) => check(request, answers[i]));
}

export function askGreedy(sut: SystemUnderTest, method: "greedy" | "tracedGreedy" | "batchedGreedy", requests: readonly GreedyRequest[], vocabSize?: number): Promise<Checked<TokenId[]>[]> {
  return ask(sut, method, (batch) => sut[method]!(batch), requests, (request, answer) => checkGreedyAnswer(request, answer, vocabSize), method !== "batchedGreedy");
}

export function askTeacherForced(sut: SystemUnderTest, requests: readonly TeacherForcedRequest[], vocabSize?: number): Promise<Checked<TopK[]>[]> {
  return ask(sut, "teacherForcedTopK", (batch) => sut.teacherForcedTopK!(batch), requests, (request, answer) => checkTeacherForcedAnswer(request, answer, vocabSize), true);
}
