import type { TextReference } from "../text-reference.js";
import { referenceOf } from "./reference-of.js";
import { fail, pass, postJson, readEvents, type CheckResult, type ConformanceTarget } from "../target.js";
import { choiceIds, choiceText, streamedAnswer } from "./answer-ids.js";

/** Requests per route and mode: greedy, then sampled at temperature 1 under these seeds (random weights wander through the vocabulary: multi-byte characters, punctuation after spaces). */
const SEEDS = [1, 2, 3, 4, 5];
const MAX_TOKENS = 24;

type Route = { readonly path: "/v1/completions" | "/v1/chat/completions"; readonly body: Record<string, unknown> };

/** Both generation routes, each asking for log-probs so that a server that states ids only there (llama-server) states them. */
const ROUTES: readonly Route[] = [
  { path: "/v1/completions", body: { prompt: "Tell me why x === vs !== y , and is it ? Yes !", logprobs: 1 } },
  { path: "/v1/chat/completions", body: { messages: [{ role: "user", content: "rock ' n ' roll ' s — naïve café, 日本語 🙂" }], logprobs: true, top_logprobs: 1 } },
];

/** One answer held to the reference: its text must be the text of its ids; a missing id list is a problem too (nothing to hold it to). */
function judge(label: string, text: string, ids: number[] | undefined, reference: TextReference): string | undefined {
  if (ids === undefined) return `${label}: the answer states no token ids (token_ids, or logprobs.content[].id)`;
  const expected = reference.text(ids, false);
  return text === expected ? undefined : `${label}: text ${JSON.stringify(text)} is not the text of its ${ids.length} ids ${JSON.stringify(expected)}`;
}

/**
 * Every generated text — completions and chat, streamed and not, greedy and sampled — equals
 * llama.cpp's text of the ids the answer says it is made of (their pieces' bytes back to back,
 * read as UTF-8, control tokens silent), and a stream's pieces concatenate to it: a piece that
 * repeats, drops or rewrites earlier text fails.
 */
export async function textOfIds(target: ConformanceTarget): Promise<CheckResult> {
  const reference = referenceOf(target);
  if ("status" in reference) return reference;
  const problems: string[] = [];
  let answers = 0;
  let tricky = 0;
  for (const route of ROUTES) {
    for (const seed of [undefined, ...SEEDS]) {
      const body = { ...route.body, max_tokens: MAX_TOKENS, ...(seed === undefined ? { temperature: 0 } : { temperature: 1, seed }) };
      const label = `${route.path} ${seed === undefined ? "greedy" : `seed ${seed}`}`;
      const plain = await postJson(target, route.path, body);
      const choice = plain.json.choices?.[0];
      if (plain.status !== 200 || choice === undefined) {
        problems.push(`${label}: status ${plain.status}`);
        continue;
      }
      const plainProblem = judge(label, choiceText(choice), choiceIds(choice), reference);
      const streamed = streamedAnswer((await readEvents(target, route.path, { model: target.model, ...body, stream: true })).events);
      const streamProblem = judge(`${label} streamed`, streamed.pieces.join(""), streamed.ids, reference);
      problems.push(...[plainProblem, streamProblem].filter((p): p is string => p !== undefined));
      answers += 2;
      tricky += [choiceIds(choice), streamed.ids].filter((ids) => ids !== undefined && reference.isTricky(ids)).length;
    }
  }
  if (problems.length > 0) return fail(problems.slice(0, 3).join("; ") + (problems.length > 3 ? `; and ${problems.length - 3} more` : "") + ` (${problems.length} problems; ${answers} answers judged)`);
  return pass(`${answers} answers (completions and chat, streamed and not, greedy and ${SEEDS.length} seeds): each text is llama.cpp's text of its own ids (${tricky} of them where llama_detokenize's clean-up, a character split over ids or bytes that are not UTF-8 make the text easy to get wrong)`);
}
