import { createServer, request, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { fileURLToPath } from "node:url";

/**
 * FAKE, for hang tests only: an HTTP server that reads each request and never answers it — a wedged
 * server, which no real one becomes on demand. With `answersModels`, GET /v1/models lists one model
 * and every other path but `silentPath` answers 404, so a SUT opens on it (no capability found) and
 * only `silentPath` goes unanswered — or, with `halfStream`, a streaming request to it is answered
 * with the head of an SSE stream and one event, and nothing after. With `upstream`, every request is passed to that (real) server
 * until `wedge()`, and none is answered after: a server that stops answering in the middle of a run.
 * It counts the unanswered requests whose connection the client still holds open, so a test sees
 * whether an abandoned request was really let go.
 *
 *   node silent-server.js PORT      silent on every path (a server wedged while it boots)
 */
export interface SilentServerOptions {
  readonly port?: number;
  readonly answersModels?: boolean;
  readonly silentPath?: string;
  readonly halfStream?: boolean;
  readonly upstream?: string;
}

export async function startSilentServer(options: SilentServerOptions = {}): Promise<{ url: string; heldOpen: () => number; unanswered: () => string[]; wedge: () => void; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const waiting = new Set<Socket>();
  const unanswered: string[] = [];
  let wedged = false;
  const server: Server = createServer(async (req, res) => {
    if (options.upstream !== undefined && !wedged) {
      // A connection of its own per request, that never keeps a process alive: what a test then finds open is the client's.
      const passed = request(`${options.upstream}${req.url ?? "/"}`, { method: req.method, headers: req.headers, agent: false }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      passed.on("socket", (socket) => socket.unref());
      passed.on("error", () => res.destroy());
      return void req.pipe(passed);
    }
    let body = "";
    for await (const chunk of req) body += (chunk as Buffer).toString();
    const path = (req.url ?? "").split("?")[0];
    // A half stream is a stream's: the same path asked without streaming (a dialect's probe) is refused like any other.
    const silent = path === options.silentPath && (options.halfStream !== true || /"stream":true/.test(body));
    if (options.answersModels === true && !silent) {
      if (path === "/v1/models") {
        res.writeHead(200, { "content-type": "application/json" });
        return void res.end(JSON.stringify({ data: [{ id: "silent", owned_by: "FAKE silent server" }] }));
      }
      res.writeHead(404, { "content-type": "application/json" });
      return void res.end(JSON.stringify({ error: { message: "not here", type: "not_found" } }));
    }
    unanswered.push(`${req.method} ${path}`);
    waiting.add(req.socket);
    if (options.halfStream === true) {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: "x" } }] })}\n\n`);
    }
  });
  server.on("connection", (socket: Socket) => {
    // Its own side of a connection never keeps a process alive: what a test then finds open is the client's.
    socket.unref();
    sockets.add(socket);
    socket.on("close", () => {
      sockets.delete(socket);
      waiting.delete(socket);
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    heldOpen: () => waiting.size,
    unanswered: () => [...unanswered],
    wedge: () => { wedged = true; },
    close: async () => {
      // Stop accepting first: a client that retries on a fresh connection must not find one after the last is destroyed.
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}

// As a server command (`{port}` filled by the harness): silent on every path until killed, or until
// the process that started it is gone (a harness killed by a test's guard must not leave it behind).
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await startSilentServer({ port: Number(process.argv[2]) });
  const parent = process.ppid;
  setInterval(() => { if (process.ppid !== parent) process.exit(0); }, 500);
}
