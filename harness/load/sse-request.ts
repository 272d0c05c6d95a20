import { buildConnector, Pool, type Dispatcher } from "undici";
import { OpenAiSseReader } from "./sse-reader.js";

/** How a request ended; only "ok" carries a complete set of timings. */
export type RequestStatus = "ok" | "http_error" | "connection_error" | "timeout" | "stream_error" | "malformed_sse";

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

/** Where streamed requests go: one keep-alive pool per endpoint, headers built once. */
export interface StreamEndpoint {
  readonly pool: Pool;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * Arrival time of the socket read undici is parsing right now. undici parses on the socket's
 * 'readable' event, a tick after the bytes reached JavaScript, and through a WebAssembly parser;
 * stamping in `onData` would add both to every latency. So each socket records when a read arrives
 * (its `push`, which Node calls once per read) and a 'readable' listener that runs before undici's
 * publishes it here; undici then parses exactly that read.
 */
let parsingReadArrivedNs = 0n;

function stampingConnector(): buildConnector.connector {
  const connect = buildConnector({});
  return (options, callback) => connect(options, (error, socket) => {
    if (socket !== null) {
      let arrivedNs = 0n;
      const push = socket.push;
      socket.push = function stampedPush(this: typeof socket, ...args: Parameters<typeof push>) {
        arrivedNs = process.hrtime.bigint();
        return push.apply(this, args);
      };
      socket.on("readable", () => {
        parsingReadArrivedNs = arrivedNs;
        // Valid only while undici parses this read (synchronously, in its own 'readable' listener).
        queueMicrotask(() => { parsingReadArrivedNs = 0n; });
      });
    }
    // The callback's two shapes are a tuple type; re-spread them as they came.
    (callback as (error: Error | null, socket: unknown) => void)(error, socket);
  });
}

/** `stallTimeoutMs`: a server silent this long (before its headers, or between two chunks) fails the request as a timeout. */
export function openStreamEndpoint(url: string, options: { apiKey?: string; stallTimeoutMs?: number } = {}): StreamEndpoint {
  const target = new URL(url);
  const stallTimeoutMs = options.stallTimeoutMs ?? 60_000;
  return {
    // A dedicated pool (3× the request rate of undici's global agent here) with no connection cap:
    // a capped pool would queue requests inside the client, and that wait would pass for server latency.
    pool: new Pool(target.origin, { connect: stampingConnector(), connections: null, headersTimeout: stallTimeoutMs, bodyTimeout: stallTimeoutMs }),
    path: `${target.pathname}${target.search}`,
    headers: { "content-type": "application/json", ...(options.apiKey === undefined ? {} : { authorization: `Bearer ${options.apiKey}` }) },
  };
}

const MAX_ERROR_BODY = 200;

/**
 * undici's low-level handler for one request: response bytes go straight from the socket parser to
 * the SSE reader, stamped on arrival, with no stream or promise per chunk in between.
 */
class StreamHandler implements Dispatcher.DispatchHandlers {
  private httpStatus: number | null = null;
  private errorBody = "";
  private abort: ((error?: Error) => void) | undefined;
  private settled = false;
  private readonly reader: OpenAiSseReader;

  constructor(
    private readonly index: number,
    private readonly scheduledNs: bigint,
    private readonly sentNs: bigint,
    private readonly resolve: (sample: RequestSample) => void,
    onEvent?: (payload: string, stampNs: bigint) => void,
  ) {
    this.reader = new OpenAiSseReader(onEvent);
  }

  onConnect(abort: (error?: Error) => void): void {
    this.abort = abort;
  }

  onHeaders(statusCode: number): boolean {
    if (statusCode >= 200) this.httpStatus = statusCode;
    return true;
  }

  onData(chunk: Buffer): boolean {
    // Outside a stamped read (undici resuming a paused parser), the time now is the honest stamp.
    const arrivedNs = parsingReadArrivedNs === 0n ? process.hrtime.bigint() : parsingReadArrivedNs;
    if (this.httpStatus !== 200) {
      if (this.errorBody.length < MAX_ERROR_BODY) this.errorBody += chunk.toString("utf8", 0, MAX_ERROR_BODY);
      return true;
    }
    this.reader.push(chunk, arrivedNs);
    if (this.reader.failure !== undefined) {
      this.finish(this.reader.failure.status, this.reader.failure.error);
      // Leave the rest unread; the connection is not reused.
      this.abort?.();
    }
    return true;
  }

  onComplete(): void {
    if (this.httpStatus !== 200) return this.finish("http_error", this.errorBody.slice(0, MAX_ERROR_BODY));
    if (this.reader.doneNs === null) return this.finish("stream_error", "the stream ended without data: [DONE]");
    this.finish("ok", null);
  }

  onError(error: Error): void {
    const code = (error as { code?: string }).code;
    if (code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT") return this.finish("timeout", `the server went silent past the stall timeout (${error.message})`);
    if (this.httpStatus === null) return this.finish("connection_error", error.message);
    // All content and [DONE] arrived; only the connection's end went wrong.
    if (this.httpStatus === 200 && this.reader.doneNs !== null) return this.finish("ok", null);
    this.finish("stream_error", `connection lost mid-stream: ${error.message}`);
  }

  private finish(status: RequestStatus, error: string | null): void {
    if (this.settled) return;
    this.settled = true;
    const ok = status === "ok";
    this.resolve({
      index: this.index,
      scheduledNs: this.scheduledNs,
      sentNs: this.sentNs,
      status,
      httpStatus: this.httpStatus,
      error,
      contentEventsNs: this.reader.contentEventsNs,
      doneNs: ok ? this.reader.doneNs : null,
      usage: this.reader.usage,
      clientTokens: this.reader.clientTokens,
    });
  }
}

/** Sends one streaming request (a JSON body) and records its timeline; never rejects (failures become the status). */
export function streamRequest(endpoint: StreamEndpoint, index: number, body: string, scheduledNs: bigint, onEvent?: (payload: string, stampNs: bigint) => void): Promise<RequestSample> {
  return new Promise((resolve) => {
    const handler = new StreamHandler(index, scheduledNs, process.hrtime.bigint(), resolve, onEvent);
    endpoint.pool.dispatch({ path: endpoint.path, method: "POST", headers: endpoint.headers, body }, handler);
  });
}
