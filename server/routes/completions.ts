import type { IncomingMessage, ServerResponse } from "node:http";
import { randomUUID } from "node:crypto";
import type { GenerationResult } from "../generation.js";
import { parseBody } from "../http-io.js";
import { parseCompletion } from "../requests.js";
import { completionLogprobs, generatedEntry, type LogprobEntry } from "../responses/logprobs.js";
import { respondWithGenerations } from "../responses/generation-response.js";
import { tokenPieces } from "../token-text.js";
import type { RouteContext } from "./route-context.js";
import { promptIds } from "./tokens.js";

/**
 * llama-server's `timings` of one generation (tools/server: server_slot_stats), the fields a client
 * of both reads: prompt tokens cached and evaluated, tokens generated and the milliseconds from the
 * first to the last, and, when a draft model proposed any, the drafted and kept counts. Ours adds
 * `draft_accepted_positions`: the output positions whose token is a kept draft.
 */
function generationTimings(promptTokens: number, result: GenerationResult) {
  return {
    cache_n: result.cachedTokens, prompt_n: promptTokens - result.cachedTokens,
    predicted_n: result.tokens.length, predicted_ms: result.generatingMs,
    ...(result.drafted === 0 ? {} : { draft_n: result.drafted, draft_n_accepted: result.accepted, draft_accepted_positions: result.acceptedDraftPositions }),
  };
}

/** /v1/completions: one prompt or several (text or ids), echo with the prompt's own log-probs, streamed or whole. */
export async function completions(ctx: RouteContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const traceRequest = ctx.trace?.httpStarted("/v1/completions");
  const { model, vocabSize } = ctx.ready();
  const parsed = await parseBody(req, parseCompletion, { maxTokensCap: ctx.options.maxTokensCap });
  const prompts = parsed.prompts.map((p) => promptIds(model, vocabSize, p));
  const head = { id: `cmpl-${randomUUID()}`, object: "text_completion", created: Math.floor(Date.now() / 1000), model: ctx.options.modelId };
  const echoPieces = parsed.echo ? prompts.map((ids) => tokenPieces(model, ids)) : [];
  const echoText = (index: number) => (parsed.echo ? echoPieces[index].join("") : "");
  // Streamed, the echoed prompt leads the choice's first chunk (a token's, or the final one when none came).
  const echoed = new Set<number>();
  const streamedEcho = (index: number) => {
    if (echoed.has(index)) return "";
    echoed.add(index);
    return echoText(index);
  };
  const choiceLogprobs = (index: number, result: GenerationResult) => {
    if (parsed.logprobs === 0) return null;
    const generated = result.tokens.map(generatedEntry);
    if (!parsed.echo) return completionLogprobs(model, generated, 0);
    const echoed = prompts[index].map((id, i): LogprobEntry => {
      const at = i === 0 ? undefined : result.promptLogprobs?.[i - 1];
      return { id, piece: echoPieces[index][i], logprob: at?.logprob ?? null, top: at?.top };
    });
    return completionLogprobs(model, [...echoed, ...generated], 0);
  };
  const logprobs = parsed.logprobs;
  await respondWithGenerations(ctx.ready().engine, ctx.options, res, parsed, prompts, { tokenLogprobs: logprobs > 0, logprobs, promptLogprobs: parsed.echo && logprobs > 0 ? logprobs : 0, traceRequest }, {
    head,
    chunk: (index, token) => ({ ...head, choices: [{
      index, text: streamedEcho(index) + token.text, finish_reason: null, token_ids: [token.id],
      logprobs: logprobs > 0 ? completionLogprobs(model, [generatedEntry(token)], 0) : null,
    }] }),
    // The final chunk carries what was held back as a possible stop string that never completed.
    finalChunk: (index, result) => ({ ...head, choices: [{ index, text: streamedEcho(index) + result.unstreamedText, finish_reason: result.finishReason, token_ids: [], logprobs: null }] }),
    body: (results) => ({ ...head, choices: results.map((result, index) => ({
      index, text: echoText(index) + result.text, finish_reason: result.finishReason,
      token_ids: result.tokens.map((t) => t.id), ...(parsed.echo ? { prompt_token_ids: prompts[index] } : {}),
      logprobs: choiceLogprobs(index, result),
    })), ...(results.length === 1 ? { timings: generationTimings(prompts[0].length, results[0]) } : {}) }),
  });
}
