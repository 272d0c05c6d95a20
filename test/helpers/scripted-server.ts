import { setTimeout as sleep } from "node:timers/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * FAKE, for timing and fault tests only: an SSE server whose every delay is scripted, so metrics
 * can be checked against hand-computed values, and which misbehaves on cue (429, malformed SSE,
 * a reset or a stall mid-stream) in ways a real server cannot be made to on demand.
 */
export interface Script {
  /** Milliseconds before the first content event. */
  readonly firstMs: number;
  /** Milliseconds between content events. */
  readonly gapMs: number;
  readonly tokens: number;
  /** A role-only chunk at once, as OpenAI chat streams begin (must not count as the first token). */
  readonly roleChunkFirst?: boolean;
  /** Misbehaviour for request number n (0-based), if any. */
  readonly fault?: (n: number) => "429" | "malformed" | "reset" | "stall" | undefined;
}

export async function startScriptedServer(script: Script): Promise<{ url: string; close: () => Promise<void>; served: () => number }> {
  let count = 0;
  const server: Server = createServer(async (req, res) => {
    for await (const _ of req) void _;
    if (req.url === "/v1/models") {
      res.writeHead(200, { "content-type": "application/json" });
      return void res.end(JSON.stringify({ data: [{ id: "scripted" }] }));
    }
    if (req.url === "/metrics") return void res.end("");
    const n = count++;
    const fault = script.fault?.(n);
    if (fault === "429") {
      res.writeHead(429, { "content-type": "application/json" });
      return void res.end(JSON.stringify({ error: { message: "busy", type: "rate_limit_exceeded" } }));
    }
    res.writeHead(200, { "content-type": "text/event-stream" });
    if (script.roleChunkFirst === true) res.write(`data: ${JSON.stringify({ choices: [{ delta: { role: "assistant" } }] })}\n\n`);
    if (fault === "malformed") {
      await sleep(script.firstMs);
      return void res.end("this is not SSE\n\n");
    }
    await sleep(script.firstMs);
    for (let i = 0; i < script.tokens; i++) {
      if (i > 0) await sleep(script.gapMs);
      res.write(`data: ${JSON.stringify({ choices: [{ text: "x", delta: { content: "x" }, token_ids: [7] }] })}\n\n`);
      if (fault === "reset" && i === 1) return void res.socket?.destroy();
      // Silent from here on, until the client gives up and closes the connection.
      if (fault === "stall" && i === 1) return;
    }
    res.write(`data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 3, completion_tokens: script.tokens } })}\n\n`);
    res.end("data: [DONE]\n\n");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
    served: () => count,
  };
}
