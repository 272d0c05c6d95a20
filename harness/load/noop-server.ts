import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * The built-in no-op streaming server: answers every POST with `events` SSE events and no model
 * behind it, each event carrying the monotonic time it was written (`t`, ns), so a client on the
 * same machine can measure the latency it adds itself. `packets`: one socket write per event;
 * otherwise one burst. Used by `npm run bench:client` to show when the client, not the server,
 * is the limit.
 */
export async function startNoopServer(port = 0): Promise<{ port: number; close: () => Promise<void> }> {
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    // Enough of the OpenAI surface for `bench load --url` to run against it.
    if (req.method === "GET") {
      const found = url.pathname === "/v1/models";
      res.writeHead(found ? 200 : 404, { "content-type": "application/json" });
      return void res.end(found ? JSON.stringify({ object: "list", data: [{ id: "noop", object: "model" }] }) : JSON.stringify({ error: { message: "not found" } }));
    }
    const events = Number(url.searchParams.get("events") ?? 1);
    const packets = url.searchParams.get("packets") === "1";
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      if (!packets) {
        const t = process.hrtime.bigint();
        let body = "";
        for (let i = 0; i < events; i++) body += `data: {"t":${t},"choices":[{"text":"x"}]}\n\n`;
        res.end(`${body}data: [DONE]\n\n`);
        return;
      }
      let sent = 0;
      const next = (): void => {
        if (sent === events) return void res.end("data: [DONE]\n\n");
        sent++;
        res.write(`data: {"t":${process.hrtime.bigint()},"choices":[{"text":"x"}]}\n\n`);
        setImmediate(next);
      };
      next();
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return { port: (server.address() as AddressInfo).port, close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }) };
}

// Run directly as the server process of `npm run bench:client`: prints its port.
if (process.argv[1]?.endsWith("noop-server.js") && process.argv.includes("--serve")) {
  const { port } = await startNoopServer();
  console.log(`noop listening on ${port}`);
}
