import type { IncomingMessage, ServerResponse } from "node:http";
import type { LlamaModel, Token } from "node-llama-cpp";
import { pieceAsJson, TokenPieces, tokenizeAsLlamaCpp } from "../../harness/sut/token-pieces.js";
import { HttpError, readJsonObject, sendJson } from "../http-io.js";
import type { PromptInput } from "../requests.js";
import type { RouteContext } from "./route-context.js";

/**
 * Text to ids and back: /tokenize, /detokenize and /token_kinds in llama-server's dialect (its
 * tools/server: /tokenize adds nothing and parses special-token text unless told otherwise), and a
 * request's prompt as the ids the engine is fed — one place for how this server tokenizes.
 */

function flag(body: Record<string, unknown>, key: string, fallback: boolean): boolean {
  const value = body[key];
  if (value === undefined) return fallback;
  if (typeof value !== "boolean") throw new HttpError(400, `${key} must be a boolean`, "invalid_request_error", key);
  return value;
}

export async function tokenize(ctx: RouteContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { model } = ctx.ready();
  const body = await readJsonObject(req);
  if (typeof body.content !== "string") throw new HttpError(400, "content must be a string", "invalid_request_error", "content");
  const ids = tokenizeAsLlamaCpp(model, body.content, flag(body, "add_special", false), flag(body, "parse_special", true));
  if (!flag(body, "with_pieces", false)) return sendJson(res, 200, { tokens: ids });
  const pieces = TokenPieces.of(model).bytesOf(ids, true);
  sendJson(res, 200, { tokens: ids.map((id, i) => ({ id, piece: pieceAsJson(pieces[i]) })) });
}

/** The ids' pieces back to back, control tokens' text included, as llama-server's /detokenize (no clean-up of spaces). */
export async function detokenize(ctx: RouteContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { model, vocabSize } = ctx.ready();
  const body = await readJsonObject(req);
  sendJson(res, 200, { content: TokenPieces.of(model).text(vocabularyIds(body.tokens, vocabSize), true) });
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

/**
 * A prompt's ids: given ids checked against the vocabulary, or the text tokenized as llama-server
 * tokenizes a completions or chat prompt (special tokens added, special-token text parsed: a chat
 * turn applied by hand reaches the model as the turn's tokens). A prompt of no ids is a 400: the
 * model has nothing to predict from (an empty text on a vocabulary that adds no BOS).
 */
export function promptIds(model: LlamaModel, vocabSize: number, prompt: PromptInput): number[] {
  if ("ids" in prompt) {
    const bad = prompt.ids.find((id) => id >= vocabSize);
    if (bad !== undefined) throw new HttpError(400, `token id ${bad} is outside the vocabulary`, "invalid_request_error", "prompt");
    return prompt.ids;
  }
  const ids = tokenizeAsLlamaCpp(model, prompt.text, true, true);
  if (ids.length === 0) throw new HttpError(400, "the prompt is empty: it has no tokens (this vocabulary adds no BOS); send some text", "invalid_request_error", "prompt");
  return ids;
}
