/**
 * Incremental reader of an OpenAI-style Server-Sent-Events stream, fed raw response bytes as they
 * arrive. Each event is stamped with the arrival time of the chunk that held its first byte, so a
 * coalesced read never makes later events look early. Lines end in LF or CRLF (both occur in the
 * field); comments and the event/id/retry fields are allowed, anything else is malformed.
 *
 * Hot path: one `indexOf` per line and one string per data line; nothing else is allocated per
 * event except when an event is split across chunks.
 */

const LF = 0x0a;
const CR = 0x0d;
const COLON = 0x3a;
const DATA = Buffer.from("data:");
const OTHER_FIELDS = ["event:", "id:", "retry:"].map((field) => Buffer.from(field));

export type StreamFailure = { readonly status: "malformed_sse" | "stream_error"; readonly error: string };

/** An event's JSON as a server should write it; every field is checked before use. */
interface EventJson {
  error?: unknown;
  usage?: unknown;
  choices?: unknown;
}

function startsWith(bytes: Buffer, at: number, end: number, prefix: Buffer): boolean {
  if (end - at < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (bytes[at + i] !== prefix[i]) return false;
  return true;
}

export class OpenAiSseReader {
  /** Arrival of every event that carried content (never the role-only chunk). */
  readonly contentEventsNs: bigint[] = [];
  /** Tokens the client counted itself (token_ids when the server sends them, else content events). */
  clientTokens = 0;
  usage: { promptTokens: number; completionTokens: number; cachedTokens?: number } | null = null;
  /** Arrival of `data: [DONE]`; null until then. */
  doneNs: bigint | null = null;
  /** Set once the stream broke the protocol or reported an error; nothing more is read after it. */
  failure: StreamFailure | undefined;

  /** Bytes of an event whose end has not arrived yet, and when its first byte arrived. */
  private carry: Buffer | undefined;
  private carryStartNs = 0n;
  private data: string | undefined;

  constructor(private readonly onEvent?: (payload: string, stampNs: bigint) => void) {}

  push(chunk: Buffer, arrivedNs: bigint): void {
    if (this.failure !== undefined) return;
    let bytes = chunk;
    let eventStampNs = arrivedNs;
    if (this.carry !== undefined) {
      bytes = Buffer.concat([this.carry, chunk]);
      eventStampNs = this.carryStartNs;
      this.carry = undefined;
    }
    let eventStart = 0;
    let lineStart = 0;
    let newline: number;
    while ((newline = bytes.indexOf(LF, lineStart)) >= 0) {
      const lineEnd = newline > lineStart && bytes[newline - 1] === CR ? newline - 1 : newline;
      if (lineEnd === lineStart) {
        if (this.data !== undefined) this.dispatch(this.data, eventStampNs);
        if (this.failure !== undefined) return;
        this.data = undefined;
        eventStart = newline + 1;
        eventStampNs = arrivedNs;
      } else if (!this.readField(bytes, lineStart, lineEnd)) {
        return;
      }
      lineStart = newline + 1;
    }
    if (eventStart < bytes.length) {
      this.carry = bytes.subarray(eventStart);
      this.carryStartNs = eventStampNs;
      // Its data lines are read again, whole, when the rest arrives.
      this.data = undefined;
    }
  }

  /** Reads one non-empty line; false (and `failure` set) when it is not SSE. */
  private readField(bytes: Buffer, start: number, end: number): boolean {
    if (bytes[start] === COLON) return true;
    if (startsWith(bytes, start, end, DATA)) {
      const valueStart = start + DATA.length + (bytes[start + DATA.length] === 0x20 ? 1 : 0);
      const value = bytes.toString("utf8", valueStart, end);
      this.data = this.data === undefined ? value : `${this.data}\n${value}`;
      return true;
    }
    if (OTHER_FIELDS.some((field) => startsWith(bytes, start, end, field))) return true;
    this.failure = { status: "malformed_sse", error: `a line that is not SSE: ${JSON.stringify(bytes.toString("utf8", start, Math.min(end, start + 60)))}` };
    return false;
  }

  private dispatch(payload: string, stampNs: bigint): void {
    this.onEvent?.(payload, stampNs);
    if (payload === "[DONE]") {
      this.doneNs ??= stampNs;
      return;
    }
    let json: EventJson;
    try {
      json = JSON.parse(payload) as EventJson;
    } catch {
      return this.malformed(`an event whose data is not JSON: ${JSON.stringify(payload.slice(0, 60))}`);
    }
    // Whatever the server wrote is read defensively: a wrong shape is a malformed stream, never a TypeError.
    if (typeof json !== "object" || json === null || Array.isArray(json)) return this.malformed(`an event that is not a JSON object: ${JSON.stringify(payload.slice(0, 60))}`);
    if (json.error !== undefined && json.error !== null) {
      const message = (json.error as { message?: unknown }).message;
      this.failure = { status: "stream_error", error: typeof message === "string" ? message : "error event" };
      return;
    }
    const choice: unknown = Array.isArray(json.choices) ? json.choices[0] : undefined;
    if (choice !== undefined) {
      if (typeof choice !== "object" || choice === null) return this.malformed(`an event whose choice is not an object: ${JSON.stringify(payload.slice(0, 60))}`);
      const { text: rawText, token_ids: ids, delta } = choice as { text?: unknown; token_ids?: unknown; delta?: { content?: unknown } | null };
      const content = rawText ?? delta?.content ?? "";
      const text = typeof content === "string" ? content : "";
      const tokens = Array.isArray(ids) ? ids.length : (text === "" ? 0 : 1);
      if (text !== "" || tokens > 0) {
        this.contentEventsNs.push(stampNs);
        this.clientTokens += tokens;
      }
    }
    if (json.usage !== undefined && json.usage !== null) {
      const { prompt_tokens: promptTokens, completion_tokens: completionTokens } = json.usage as { prompt_tokens?: unknown; completion_tokens?: unknown };
      if (typeof promptTokens !== "number" || typeof completionTokens !== "number") return this.malformed(`an event whose usage lacks token counts: ${JSON.stringify(payload.slice(0, 80))}`);
      // How much of the prompt the server's cache held (OpenAI's usage.prompt_tokens_details; llama-server and ours report it).
      const cached = (json.usage as { prompt_tokens_details?: { cached_tokens?: unknown } | null }).prompt_tokens_details?.cached_tokens;
      this.usage = typeof cached === "number" ? { promptTokens, completionTokens, cachedTokens: cached } : { promptTokens, completionTokens };
    }
  }

  private malformed(error: string): void {
    this.failure = { status: "malformed_sse", error };
  }
}
