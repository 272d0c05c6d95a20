import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { fileURLToPath } from "node:url";

/**
 * FAKE, for hang tests only: an HTTP server that reads each request and never answers it — a wedged
 * server, which no real one becomes on demand. With `answersModels`, GET /v1/models lists one model
 * and every other path but `silentPath` answers 404, so a SUT opens on it (no capability found) and
 * only `silentPath` goes unanswered. It counts the unanswered requests whose connection the client
 * still holds open, so a test sees whether an abandoned request was really let go.
 *
 *   node silent-server.js PORT      silent on every path (a server wedged while it boots)
 */
export interface SilentServerOptions {
  readonly port?: number;
  readonly answersModels?: boolean;
  readonly silentPath?: string;
}

export async function startSilentServer(options: SilentServerOptions = {}): Promise<{ url: string; heldOpen: () => number; unanswered: () => string[]; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const waiting = new Set<Socket>();
  const unanswered: string[] = [];
  const server: Server = createServer((req, res) => {
    req.resume();
    const path = (req.url ?? "").split("?")[0];
    if (options.answersModels === true && path !== options.silentPath) {
      if (path === "/v1/models") {
        res.writeHead(200, { "content-type": "application/json" });
        return void res.end(JSON.stringify({ data: [{ id: "silent", owned_by: "FAKE silent server" }] }));
      }
      res.writeHead(404, { "content-type": "application/json" });
      return void res.end(JSON.stringify({ error: { message: "not here", type: "not_found" } }));
    }
    unanswered.push(`${req.method} ${path}`);
    waiting.add(req.socket);
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
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// As a server command (`{port}` filled by the harness): silent on every path until killed.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await startSilentServer({ port: Number(process.argv[2]) });
}
