import { request } from "undici";
import type { HttpResponse } from "./dialects/dialect.js";

/**
 * One HTTP call with undici (never Node 20's global fetch: it is an order of magnitude slower).
 * The call listens on a signal of its own, which AbortSignal.any links to the caller's without a
 * listener on it: undici adds an abort listener to the signal it is given for each request in
 * flight, and callers send batches at once under one signal (a SUT's 16 texts to tokenize, a
 * conformance burst), which would pass Node's limit of 10 and print MaxListenersExceededWarning.
 */
export async function httpCall(url: string, options: { method?: string; body?: unknown; rawBody?: string; apiKey?: string; signal?: AbortSignal } = {}): Promise<HttpResponse> {
  const signal = options.signal === undefined ? undefined : AbortSignal.any([options.signal]);
  const send = () => request(url, {
    method: (options.method ?? (options.body === undefined && options.rawBody === undefined ? "GET" : "POST")) as "GET" | "POST",
    headers: { "content-type": "application/json", ...(options.apiKey === undefined ? {} : { authorization: `Bearer ${options.apiKey}` }) },
    body: options.rawBody ?? (options.body === undefined ? undefined : JSON.stringify(options.body)),
    signal,
  });
  // A server may close an idle keep-alive connection just as the pool reuses it (llama-server does
  // after a few seconds): the request never reached it, so it is sent once more on a fresh socket.
  // A server that is gone fails the second attempt too.
  const response = await send().catch((error: unknown) => {
    if ((error as { code?: unknown }).code !== "UND_ERR_SOCKET" || options.signal?.aborted === true) throw error;
    return send();
  });
  return { status: response.statusCode, headers: response.headers, text: await response.body.text() };
}
