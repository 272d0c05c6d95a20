import { buildConnector, Client, Pool, type Dispatcher } from "undici";
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
  /** The server's usage event; cachedTokens where it said how much of the prompt its cache held. */
  readonly usage: { readonly promptTokens: number; readonly completionTokens: number; readonly cachedTokens?: number } | null;
  /** Tokens the client counted itself (token_ids when the server sends them, else content events). */
  readonly clientTokens: number;
  /**
   * 1, or 2 when the first attempt's connection was closed before a byte of the response came
   * (a keep-alive connection the server was closing as the request went out) and the request was
   * sent again on a fresh connection. Either way the request is one sample, timed from its schedule.
   */
  readonly attempts: number;
}

/** Where streamed requests go: one keep-alive pool per endpoint, headers built once. */
export interface StreamEndpoint {
  readonly pool: Pool;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  /** A new connection of its own for one request, closed after it (the retry of a request a closing connection lost). */
  readonly freshConnection: () => Client;
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

/**
 * Connection reuse, the way robust HTTP/1.1 clients do it (undici implements the first three; the
 * settings below pin them): a response carrying `Connection: close` (cpp-httplib's 100th on a
 * connection, any error response from it) ends that connection's use — nothing more is sent on it;
 * a `Keep-Alive: timeout=N` response retires the idle connection KEEP_ALIVE_MARGIN_MS before the
 * server's N seconds are up; a server that announces nothing keeps it IDLE_WITHOUT_ANNOUNCEMENT_MS.
 * What no client can prevent — the server closing an idle connection just as a request goes out
 * on it — is `retriesOnFreshConnection`'s job.
 */
const KEEP_ALIVE_MARGIN_MS = 2_000;
const IDLE_WITHOUT_ANNOUNCEMENT_MS = 4_000;

function connectionOptions(stallTimeoutMs: number) {
  return { connect: stampingConnector(), headersTimeout: stallTimeoutMs, bodyTimeout: stallTimeoutMs, keepAliveTimeout: IDLE_WITHOUT_ANNOUNCEMENT_MS, keepAliveTimeoutThreshold: KEEP_ALIVE_MARGIN_MS, pipelining: 1 };
}

/** `stallTimeoutMs`: a server silent this long (before its headers, or between two chunks) fails the request as a timeout. */
export function openStreamEndpoint(url: string, options: { apiKey?: string; stallTimeoutMs?: number } = {}): StreamEndpoint {
  const target = new URL(url);
  const stallTimeoutMs = options.stallTimeoutMs ?? 60_000;
  return {
    // A dedicated pool (3× the request rate of undici's global agent here) with no connection cap:
    // a capped pool would queue requests inside the client, and that wait would pass for server latency.
    pool: new Pool(target.origin, { ...connectionOptions(stallTimeoutMs), connections: null }),
    path: `${target.pathname}${target.search}`,
    headers: { "content-type": "application/json", ...(options.apiKey === undefined ? {} : { authorization: `Bearer ${options.apiKey}` }) },
    freshConnection: () => new Client(target.origin, connectionOptions(stallTimeoutMs)),
  };
}

/**
 * Pure: whether a request failed the way a request lost to a closing keep-alive connection fails —
 * the connection ended (reset, broken pipe, or the server's FIN) before a single byte of the
 * response — so the server never answered it and it may be sent again, once, on a fresh connection.
 * A refused or timed-out connection, or one that failed after the response began, is the server's
 * own failure and is reported as it happened.
 */
export function retriesOnFreshConnection(error: Error, responseBegan: boolean): boolean {
  if (responseBegan) return false;
  const code = (error as { code?: string }).code;
  return code === "ECONNRESET" || code === "EPIPE" || code === "UND_ERR_SOCKET";
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
    private readonly attempt: number,
    private readonly resolve: (sample: RequestSample) => void,
    /** Sends the request again on a fresh connection (first attempt only). */
    private readonly retry: (() => void) | undefined,
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
    if (this.retry !== undefined && !this.settled && retriesOnFreshConnection(error, this.httpStatus !== null)) {
      this.settled = true; // this attempt resolves nothing: the retry's outcome is the request's
      return this.retry();
    }
    if (this.httpStatus === null) return this.finish("connection_error", `${error.message}${this.attempt > 1 ? " (on a fresh connection, after the first was closed before any response)" : ""}`);
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
      attempts: this.attempt,
    });
  }
}

/**
 * Sends one streaming request (a JSON body) and records its timeline; never rejects (failures become
 * the status). A request lost to a closing keep-alive connection is sent once more on a connection
 * of its own (closed after it) and still yields exactly one sample.
 */
export function streamRequest(endpoint: StreamEndpoint, index: number, body: string, scheduledNs: bigint, onEvent?: (payload: string, stampNs: bigint) => void): Promise<RequestSample> {
  const options = { path: endpoint.path, method: "POST" as const, headers: endpoint.headers, body };
  const sentNs = process.hrtime.bigint();
  return new Promise((resolve) => {
    const retry = (): void => {
      const connection = endpoint.freshConnection();
      const settle = (sample: RequestSample): void => {
        resolve(sample);
        void connection.close();
      };
      connection.dispatch(options, new StreamHandler(index, scheduledNs, sentNs, 2, settle, undefined, onEvent));
    };
    endpoint.pool.dispatch(options, new StreamHandler(index, scheduledNs, sentNs, 1, resolve, retry, onEvent));
  });
}
