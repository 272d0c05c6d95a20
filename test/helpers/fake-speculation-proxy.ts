/**
 * FAKE, for the speculative check's sensitivity only: an HTTP proxy in front of a real llama-server
 * that changes one generated token of every /completion answer whose `timings` say speculation
 * accepted a draft — the silent bug of a speculator that keeps a draft token the target did not
 * choose. Answers without accepted drafts (the same server without speculation) pass untouched,
 * so the check must catch the change and name the position.
 *
 *   node fake-speculation-proxy.js --listen PORT --position N -- llama-server ... --port {inner-port}
 *
 * `{inner-port}` in the server's argv becomes a free loopback port the proxy forwards to.
 */
import { spawn } from "node:child_process";
import { createServer as createHttpServer, request as httpRequest } from "node:http";
import { createServer as createNetServer } from "node:net";

const args = process.argv.slice(2);
const split = args.indexOf("--");
const option = (name: string): string => {
  const at = args.indexOf(name);
  if (at < 0 || at > split) throw new Error(`fake-speculation-proxy: ${name} is required`);
  return args[at + 1];
};
const listen = Number(option("--listen"));
const position = Number(option("--position"));

/** A different id in the character range of the fixtures' vocabulary (ids from 259 up are characters). */
const otherId = (id: number): number => (id > 259 ? id - 1 : id + 1);

const free = createNetServer();
await new Promise<void>((resolve) => free.listen(0, "127.0.0.1", resolve));
const innerPort = (free.address() as { port: number }).port;
await new Promise<void>((resolve) => free.close(() => resolve()));

const argv = args.slice(split + 1).map((part) => part.replaceAll("{inner-port}", String(innerPort)));
const child = spawn(argv[0], argv.slice(1), { stdio: ["ignore", "ignore", "inherit"] });
const stop = () => { child.kill("SIGTERM"); process.exit(0); };
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
child.on("exit", (code) => process.exit(code ?? 1));

createHttpServer((incoming, outgoing) => {
  const chunks: Buffer[] = [];
  incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
  incoming.on("end", () => {
    const forwarded = httpRequest({ host: "127.0.0.1", port: innerPort, method: incoming.method, path: incoming.url, headers: incoming.headers }, (answer) => {
      const body: Buffer[] = [];
      answer.on("data", (chunk: Buffer) => body.push(chunk));
      answer.on("end", () => {
        let text = Buffer.concat(body).toString("utf8");
        if (incoming.url === "/completion" && answer.statusCode === 200) {
          const json = JSON.parse(text) as { tokens?: number[]; timings?: { draft_n_accepted?: number } };
          if ((json.timings?.draft_n_accepted ?? 0) > 0 && Array.isArray(json.tokens) && json.tokens.length > position) {
            json.tokens[position] = otherId(json.tokens[position]);
            text = JSON.stringify(json);
          }
        }
        const headers = { ...answer.headers, "content-length": String(Buffer.byteLength(text)) };
        delete headers["transfer-encoding"];
        outgoing.writeHead(answer.statusCode ?? 502, headers);
        outgoing.end(text);
      });
    });
    forwarded.on("error", () => { outgoing.writeHead(503); outgoing.end(); });
    forwarded.end(Buffer.concat(chunks));
  });
}).listen(listen, "127.0.0.1");
