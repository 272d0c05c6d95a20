/**
 * FAKE, for the speculative check's sensitivity only: an HTTP proxy in front of a real server
 * (llama-server's /completion or our server's /v1/completions) that spoils the answers whose
 * `timings` say speculation accepted a draft — a speculating build broken in a way no real server
 * shows on demand. Answers without accepted drafts (the same server without speculation) pass
 * untouched, so whatever the check makes of it is the speculating side's fault.
 *
 *   node fake-speculation-proxy.js --listen PORT (--position N | --fault FAULT) [--held-open-file PATH] -- SERVER ARGV ... --port {inner-port}
 *
 * `--position N`: the id at position N changes (a speculator that keeps a draft the target did not choose).
 * `--fault` acts on answers longer than the dialect probe's 8 tokens only, so the probe still sees a
 * server that speculates and the suite's own cases meet the fault:
 *   short        the answer keeps its first half of ids, its timings counting only them (a consistent short answer)
 *   hang         the answer never comes (a wedged decode step)
 *   die          the server and the proxy exit instead of answering (a crash mid-run)
 *   wrong-shape  the ids come back as text
 * and one fault acts on the model list instead:
 *   silent-models  GET /v1/models is answered once (the probes that open the arm), never after: a
 *                  server wedged between its open and the first request the suite kind sends it
 *
 * `{inner-port}` in the server's argv becomes a free loopback port the proxy forwards to.
 * `--held-open-file PATH`: when stopped, the proxy writes there how many of the requests it left
 * unanswered still had their connection open (the client never let them go).
 * A stop (SIGTERM, SIGINT) is passed to the server, and the proxy exits once the server has: it never
 * leaves the server running after it, which a run stopping it would not see.
 */
import { spawn } from "node:child_process";
import { createServer as createHttpServer, request as httpRequest } from "node:http";
import { createServer as createNetServer, type Socket } from "node:net";
import { writeFileAtomicSync } from "../../harness/io/atomic-write.js";

const args = process.argv.slice(2);
const split = args.indexOf("--");
const option = (name: string): string => {
  const at = args.indexOf(name);
  if (at < 0 || at > split) throw new Error(`fake-speculation-proxy: ${name} is required`);
  return args[at + 1];
};
const listen = Number(option("--listen"));
const given = (name: string): string | undefined => (args.slice(0, split).includes(name) ? option(name) : undefined);
const fault = given("--fault") ?? `wrong-token:${option("--position")}`;
const heldOpenFile = given("--held-open-file");
/** The dialect probe asks a speculating server for this many tokens (harness/sut/dialects/probe.ts). */
const PROBE_TOKENS = 8;

/** A different id in the character range of the fixtures' vocabulary (ids from 259 up are characters). */
const otherId = (id: number): number => (id > 259 ? id - 1 : id + 1);

const free = createNetServer();
await new Promise<void>((resolve) => free.listen(0, "127.0.0.1", resolve));
const innerPort = (free.address() as { port: number }).port;
await new Promise<void>((resolve) => free.close(() => resolve()));

const argv = args.slice(split + 1).map((part) => part.replaceAll("{inner-port}", String(innerPort)));
const child = spawn(argv[0], argv.slice(1), { stdio: ["ignore", "ignore", "inherit"] });
/** The connections of the requests left unanswered, while the client holds them open. */
const held = new Set<Socket>();
let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  if (heldOpenFile !== undefined) writeFileAtomicSync(heldOpenFile, String(held.size));
  child.kill("SIGTERM");
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
child.on("exit", (code) => process.exit(stopping ? 0 : code ?? 1));

/** Leaves a request unanswered, counted among the held ones until its client closes the connection. */
function hold(socket: Socket): void {
  if (socket.destroyed) return;
  held.add(socket);
  socket.once("close", () => held.delete(socket));
}

interface Answer {
  tokens?: unknown;
  choices?: { token_ids?: unknown }[];
  timings?: { draft_n_accepted?: number; predicted_n?: number; draft_accepted_positions?: number[] };
}

/** The generated ids of either server's answer, where they are. */
function idsOf(json: Answer): number[] | undefined {
  const ids = json.tokens ?? json.choices?.[0]?.token_ids;
  return Array.isArray(ids) ? (ids as number[]) : undefined;
}

function setIds(json: Answer, ids: unknown): void {
  if (json.tokens !== undefined) json.tokens = ids;
  else json.choices![0].token_ids = ids;
}

/** The answer's text with the fault applied, or undefined where the fault answers nothing. */
function spoil(text: string): string | undefined {
  const json = JSON.parse(text) as Answer;
  const ids = idsOf(json);
  if ((json.timings?.draft_n_accepted ?? 0) === 0 || ids === undefined) return text;
  if (fault.startsWith("wrong-token:")) {
    const position = Number(fault.slice("wrong-token:".length));
    if (ids.length <= position) return text;
    ids[position] = otherId(ids[position]);
    return JSON.stringify(json);
  }
  if (ids.length <= PROBE_TOKENS) return text;
  switch (fault) {
    case "short": {
      const half = Math.floor(ids.length / 2);
      const timings = json.timings!;
      setIds(json, ids.slice(0, half));
      timings.predicted_n = half;
      if (timings.draft_accepted_positions !== undefined) {
        timings.draft_accepted_positions = timings.draft_accepted_positions.filter((p) => p < half);
        timings.draft_n_accepted = timings.draft_accepted_positions.length;
      }
      return JSON.stringify(json);
    }
    case "hang":
      return undefined;
    case "die":
      child.kill("SIGKILL");
      return process.exit(1);
    case "wrong-shape":
      setIds(json, ids.map(String));
      return JSON.stringify(json);
    case "silent-models":
      return text;
    default:
      throw new Error(`fake-speculation-proxy: unknown --fault ${fault}`);
  }
}

let modelListsAnswered = 0;

createHttpServer((incoming, outgoing) => {
  // Read, never answered: the request stays open until the client lets it go.
  if (fault === "silent-models" && incoming.url === "/v1/models" && ++modelListsAnswered > 1) return hold(incoming.socket);
  const chunks: Buffer[] = [];
  incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
  incoming.on("end", () => {
    const forwarded = httpRequest({ host: "127.0.0.1", port: innerPort, method: incoming.method, path: incoming.url, headers: incoming.headers }, (answer) => {
      const body: Buffer[] = [];
      answer.on("data", (chunk: Buffer) => body.push(chunk));
      answer.on("end", () => {
        let text = Buffer.concat(body).toString("utf8");
        const completion = incoming.url === "/completion" || incoming.url === "/v1/completions";
        const spoiled = completion && answer.statusCode === 200 ? spoil(text) : text;
        if (spoiled === undefined) return hold(incoming.socket);
        text = spoiled;
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
