import { Pool } from "undici";

/** One connection pool per origin: a load client reuses keep-alive connections (3× the request rate of undici's global agent here). */
const pools = new Map<string, Pool>();

function poolFor(url: URL): Pool {
  let pool = pools.get(url.origin);
  if (pool === undefined) {
    pool = new Pool(url.origin, { connections: 512 });
    pools.set(url.origin, pool);
  }
  return pool;
}

/** How a request ended; only "ok" carries a complete set of timings. */
export type RequestStatus = "ok" | "http_error" | "connection_error" | "stream_error" | "malformed_sse";

/**
 * One streamed request as the client saw it. Times are nanoseconds of the process's monotonic clock
 * (process.hrtime.bigint, CLOCK_MONOTONIC), each event stamped when the chunk holding its first
 * byte arrived — before any parsing.
 */
export interface RequestSample {
  readonly index: number;
  /** When the schedule said to send it (open loop), or when it was sent (closed loop). */
  readonly scheduledNs: bigint;
  readonly sentNs: bigint;
  readonly status: RequestStatus;
  readonly httpStatus: number | null;
  readonly error: string | null;
  /** Arrival of every event that carried content (never the role-only chunk). */
  readonly contentEventsNs: readonly bigint[];
  readonly doneNs: bigint | null;
  readonly usage: { readonly promptTokens: number; readonly completionTokens: number } | null;
  /** Tokens the client counted itself (token_ids when the server sends them, else content events). */
  readonly clientTokens: number;
}

interface ParsedEvent {
  readonly content: boolean;
  readonly tokens: number;
  readonly usage?: { prompt_tokens: number; completion_tokens: number };
  readonly error?: string;
  readonly done: boolean;
}

function parseEvent(event: string): ParsedEvent | undefined {
  if (!event.startsWith("data: ")) return undefined;
  const payload = event.slice(6);
  if (payload === "[DONE]") return { content: false, tokens: 0, done: true };
  let json: {
    error?: { message?: string };
    usage?: { prompt_tokens: number; completion_tokens: number };
    choices?: { text?: string; token_ids?: number[]; delta?: { content?: string } }[];
  };
  try {
    json = JSON.parse(payload);
  } catch {
    return undefined;
  }
  if (json.error !== undefined) return { content: false, tokens: 0, error: json.error.message ?? "error event", done: false };
  const choice = json.choices?.[0];
  const text = choice?.text ?? choice?.delta?.content ?? "";
  const tokens = choice?.token_ids?.length ?? (text === "" ? 0 : 1);
  return { content: text !== "" || tokens > 0, tokens, usage: json.usage ?? undefined, done: false };
}

/** Sends one streaming request and records its timeline; never throws (failures become the status). */
export async function streamRequest(index: number, url: string, body: unknown, scheduledNs: bigint, apiKey?: string, onEvent?: (payload: string, stampNs: bigint) => void): Promise<RequestSample> {
  const sentNs = process.hrtime.bigint();
  const contentEventsNs: bigint[] = [];
  let usage: RequestSample["usage"] = null;
  let clientTokens = 0;
  const base = { index, scheduledNs, sentNs };
  let response;
  try {
    const target = new URL(url);
    response = await poolFor(target).request({
      path: `${target.pathname}${target.search}`,
      method: "POST",
      headers: { "content-type": "application/json", ...(apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` }) },
      body: JSON.stringify(body),
    });
  } catch (error) {
    return { ...base, status: "connection_error", httpStatus: null, error: (error as Error).message, contentEventsNs, doneNs: null, usage, clientTokens };
  }
  if (response.statusCode !== 200) {
    const text = await response.body.text().catch(() => "");
    return { ...base, status: "http_error", httpStatus: response.statusCode, error: text.slice(0, 200), contentEventsNs, doneNs: null, usage, clientTokens };
  }
  let pending = "";
  let pendingStartNs: bigint | undefined;
  let doneNs: bigint | null = null;
  try {
    for await (const chunk of response.body) {
      const arrivedNs = process.hrtime.bigint();
      const text = (chunk as Buffer).toString("utf8");
      pendingStartNs ??= arrivedNs;
      pending += text;
      let cut: number;
      while ((cut = pending.indexOf("\n\n")) >= 0) {
        const raw = pending.slice(0, cut);
        const event = parseEvent(raw);
        const stampNs = pendingStartNs;
        onEvent?.(raw, stampNs ?? arrivedNs);
        pending = pending.slice(cut + 2);
        // The next event's first byte arrived in this chunk if anything is left over.
        pendingStartNs = pending === "" ? undefined : arrivedNs;
        if (event === undefined) {
          return { ...base, status: "malformed_sse", httpStatus: 200, error: "an event that is not `data: <json>`", contentEventsNs, doneNs: null, usage, clientTokens };
        }
        if (event.error !== undefined) {
          return { ...base, status: "stream_error", httpStatus: 200, error: event.error, contentEventsNs, doneNs: null, usage, clientTokens };
        }
        if (event.content) {
          contentEventsNs.push(stampNs ?? arrivedNs);
          clientTokens += event.tokens;
        }
        if (event.usage !== undefined) usage = { promptTokens: event.usage.prompt_tokens, completionTokens: event.usage.completion_tokens };
        // Keep reading to the natural end of the response: leaving the loop early aborts the body,
        // and building that AbortError's stack cost more than the rest of the request here.
        if (event.done) doneNs ??= arrivedNs;
      }
    }
  } catch (error) {
    return { ...base, status: "stream_error", httpStatus: 200, error: `connection lost mid-stream: ${(error as Error).message}`, contentEventsNs, doneNs: null, usage, clientTokens };
  }
  if (doneNs !== null) return { ...base, status: "ok", httpStatus: 200, error: null, contentEventsNs, doneNs, usage, clientTokens };
  return { ...base, status: "stream_error", httpStatus: 200, error: "the stream ended without data: [DONE]", contentEventsNs, doneNs: null, usage, clientTokens };
}
