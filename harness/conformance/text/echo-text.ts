import { referenceOf } from "./reference-of.js";
import { fail, pass, postJson, readEvents, type CheckResult, type ConformanceTarget } from "../target.js";
import { choiceIds, choiceText, streamedAnswer } from "./answer-ids.js";
import { HOSTILE_TEXTS } from "./hostile-texts.js";

const GENERATED = 3;

/**
 * `echo` (lm-eval's loglikelihood requests send it): the text is the prompt's text — llama.cpp's
 * text of the ids it parses to as llama-server parses a completions prompt, which for these prompts
 * is the prompt itself — followed by the text of the generated ids; streamed, the pieces add up to
 * the same. A server that cleans up spaces, repeats the prompt or drops the echo when streaming fails.
 */
export async function echoText(target: ConformanceTarget): Promise<CheckResult> {
  const reference = referenceOf(target);
  if ("status" in reference) return reference;
  const problems: string[] = [];
  for (const prompt of HOSTILE_TEXTS) {
    const echoed = reference.text(reference.tokenize(prompt, true, true), false);
    const body = { prompt, echo: true, max_tokens: GENERATED, temperature: 0, logprobs: 1 };
    const plain = await postJson(target, "/v1/completions", body);
    const choice = plain.json.choices?.[0];
    const ids = choice === undefined ? undefined : choiceIds(choice);
    // With echo, a server may state the prompt's ids in its log-prob columns too: the generated ones are the last GENERATED.
    const generated = ids?.slice(-Math.min(ids.length, GENERATED));
    if (plain.status !== 200 || choice === undefined || generated === undefined) {
      problems.push(`${JSON.stringify(prompt)}: status ${plain.status}${choice === undefined ? "" : ", no token ids"}`);
      continue;
    }
    const expected = echoed + reference.text(generated, false);
    const text = choiceText(choice);
    if (text !== expected) problems.push(`${JSON.stringify(prompt)}: echoed ${JSON.stringify(text)}, expected ${JSON.stringify(expected)}`);
    const streamed = streamedAnswer((await readEvents(target, "/v1/completions", { model: target.model, ...body, stream: true })).events).pieces.join("");
    if (streamed !== text) problems.push(`${JSON.stringify(prompt)} streamed: ${JSON.stringify(streamed)}, not the non-streamed ${JSON.stringify(text)}`);
  }
  if (problems.length > 0) return fail(problems.slice(0, 3).join("; ") + (problems.length > 3 ? `; and ${problems.length - 3} more` : ""));
  return pass(`${HOSTILE_TEXTS.length} prompts echoed exactly (text of their ids, then the generated ids' text), streamed and not`);
}
