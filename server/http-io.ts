import type { IncomingMessage, ServerResponse } from "node:http";
import { BadRequest } from "./requests.js";

/**
 * The server's HTTP plumbing, shared by every route: reading a JSON body within its size cap,
 * answering JSON or an OpenAI-shaped error, and writing one server-sent event.
 */

const MAX_BODY_BYTES = 4 * 1024 * 1024;

/** An answer other than 200, in OpenAI's error shape (`param` names the offending field). */
export class HttpError extends Error {
  constructor(readonly status: number, message: string, readonly type: string, readonly param: string | null = null, readonly headers: Record<string, string> = {}) {
    super(message);
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

export function sendError(res: ServerResponse, error: HttpError): void {
  sendJson(res, error.status, { error: { message: error.message, type: error.type, param: error.param, code: error.status } }, error.headers);
}

/** One server-sent event; nothing once the response has ended (a client gone, or an error already sent). */
export function sse(res: ServerResponse, body: unknown): void {
  if (!res.writableEnded) res.write(`data: ${JSON.stringify(body)}\n\n`);
}

/**
 * The request's body, read with the stream's own events: an async iterator over the request took
 * about 0.05 ms more per request on the 2-core box (0.18 against 0.13 ms from the headers to a
 * parsed body, median, under load), on every request's time to first token. Past the size cap the
 * rest is read and dropped, so that the 413 answer reaches the client.
 */
function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const fail = (error: Error) => { req.removeAllListeners("data"); req.resume(); reject(error); };
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) return fail(new HttpError(413, "request body too large", "invalid_request_error"));
      chunks.push(chunk);
    });
    req.once("end", () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
    req.once("error", reject);
    // A connection closed before the body's end (after it, the promise is already settled).
    req.once("close", () => reject(new HttpError(400, "the connection closed before the request body ended", "invalid_request_error")));
  });
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const body = await readBody(req);
  try {
    return JSON.parse(body.toString("utf8"));
  } catch {
    throw new HttpError(400, "the request body is not valid JSON", "invalid_request_error");
  }
}

/** The llama.cpp-style extensions take a JSON object too; anything else is a 400, not a TypeError. */
export async function readJsonObject(req: IncomingMessage): Promise<Record<string, unknown>> {
  const body = await readJson(req);
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new HttpError(400, "the request body must be a JSON object", "invalid_request_error");
  return body as Record<string, unknown>;
}

/** Reads and validates a request body (requests.ts); a validation problem is a 400 naming the parameter. */
export async function parseBody<T>(req: IncomingMessage, parse: (body: unknown, limits: { maxTokensCap: number }) => T, limits: { maxTokensCap: number }): Promise<T> {
  const body = await readJson(req);
  try {
    return parse(body, limits);
  } catch (error) {
    if (error instanceof BadRequest) throw new HttpError(400, error.message, "invalid_request_error", error.param);
    throw error;
  }
}
