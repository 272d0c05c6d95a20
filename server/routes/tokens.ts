import type { IncomingMessage, ServerResponse } from "node:http";
import type { LlamaModel, Token } from "node-llama-cpp";
import { HttpError, readJsonObject, sendJson } from "../http-io.js";
import type { PromptInput } from "../requests.js";
import type { RouteContext } from "./route-context.js";

/**
 * Text to ids and back: /tokenize, /detokenize and /token_kinds (llama.cpp-server style
 * extensions the harness uses to feed ids and build haystacks), and a request's prompt as the ids
 * the engine is fed — one place for how this server tokenizes.
 */

/** The BOS a prompt starts with, or null: the file's add_bos_token decides, as in llama.cpp (a vocabulary can name a BOS it never adds: Qwen3's). */
function addedBos(model: LlamaModel): Token | null {
  return model.tokens.shouldPrependBosToken ? model.tokens.bos : null;
}

export async function tokenize(ctx: RouteContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { model } = ctx.ready();
  const body = await readJsonObject(req);
  if (typeof body.content !== "string") throw new HttpError(400, "content must be a string", "invalid_request_error", "content");
  const ids = model.tokenize(body.content) as number[];
  const bos = addedBos(model);
  sendJson(res, 200, { tokens: body.add_special === false || bos === null ? ids : [bos, ...ids] });
}

export async function detokenize(ctx: RouteContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { model, vocabSize } = ctx.ready();
  const body = await readJsonObject(req);
  sendJson(res, 200, { content: model.detokenize(vocabularyIds(body.tokens, vocabSize)) });
}

export async function tokenKinds(ctx: RouteContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { model, vocabSize } = ctx.ready();
  const body = await readJsonObject(req);
  sendJson(res, 200, { kinds: vocabularyIds(body.tokens, vocabSize).map((id) => {
    const a = model.getTokenAttributes(id);
    return a.byte ? "byte" : a.unknown ? "unknown" : a.control ? "control" : "text";
  }) });
}

/** Ids checked against the vocabulary: llama.cpp aborts the whole process on one outside it. */
function vocabularyIds(tokens: unknown, vocabSize: number): Token[] {
  if (!Array.isArray(tokens) || !tokens.every((id) => Number.isInteger(id) && id >= 0 && id < vocabSize)) {
    throw new HttpError(400, `tokens must be an array of ids from 0 to ${vocabSize - 1}`, "invalid_request_error", "tokens");
  }
  return tokens as Token[];
}

/** A prompt's ids: given ids checked against the vocabulary, or the text tokenized with the BOS the file asks for. */
export function promptIds(model: LlamaModel, vocabSize: number, prompt: PromptInput, parseSpecial = false): number[] {
  if ("ids" in prompt) {
    const bad = prompt.ids.find((id) => id >= vocabSize);
    if (bad !== undefined) throw new HttpError(400, `token id ${bad} is outside the vocabulary`, "invalid_request_error", "prompt");
    return prompt.ids;
  }
  const ids = model.tokenize(prompt.text, parseSpecial) as number[];
  const bos = addedBos(model);
  return bos === null ? ids : [bos, ...ids];
}
