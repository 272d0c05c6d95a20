import { referenceOf } from "./reference-of.js";
import { fail, pass, postJson, type CheckResult, type ConformanceTarget } from "../target.js";

/**
 * A completions prompt holding special-token text (a chat turn applied by hand, as lm-eval's
 * local-completions sends one) is parsed as llama-server parses it: the special tokens as tokens,
 * BOS added where the file asks. The server's usage.prompt_tokens must be llama.cpp's count.
 * SKIPPED where the file names no control token (nothing for parsing to change).
 */
export async function specialTokenPrompt(target: ConformanceTarget): Promise<CheckResult> {
  const reference = referenceOf(target);
  if ("status" in reference) return reference;
  const special = reference.controlTexts[0];
  if (special === undefined) return { status: "skip", detail: "the file names no control token whose text a prompt could hold" };
  const prompt = `${special}Hello there${special}`;
  const parsed = reference.tokenize(prompt, true, true);
  const plain = reference.tokenize(prompt, true, false);
  if (parsed.length === plain.length) return { status: "skip", detail: `${JSON.stringify(special)} tokenizes to as many ids parsed as plain: the count cannot tell them apart` };
  const { status, json } = await postJson(target, "/v1/completions", { prompt, max_tokens: 1, temperature: 0 });
  const used = (json.usage as { prompt_tokens?: unknown } | undefined)?.prompt_tokens;
  if (status !== 200 || used !== parsed.length) {
    return fail(`prompt ${JSON.stringify(prompt)}: status ${status}, prompt_tokens ${String(used)}; llama.cpp parses it to ${parsed.length} ids (${plain.length} as plain text)`);
  }
  return pass(`prompt ${JSON.stringify(prompt)}: ${used} prompt tokens, the special tokens parsed (${plain.length} as plain text)`);
}

/** An empty prompt is answered (200) or refused as bad input (400), never a server error: a vocabulary without a BOS leaves it no token at all. */
export async function emptyPrompt(target: ConformanceTarget): Promise<CheckResult> {
  const { status, json } = await postJson(target, "/v1/completions", { prompt: "", max_tokens: 2, temperature: 0 });
  if (status === 200 || status === 400) return pass(`an empty prompt: ${status}${status === 400 ? ` (${JSON.stringify((json as { error?: { message?: unknown } }).error?.message ?? "")})` : ""}`);
  return fail(`an empty prompt: status ${status} ${JSON.stringify(json).slice(0, 160)} (answer it, or refuse it with a 400)`);
}
