/**
 * npm run soak — our server under sustained, hostile load on loopback, with its books checked.
 *
 * Starts `bench serve` (tiny-random:F32, CPU) and keeps 2 × slots requests in flight for --duration
 * seconds (or --max-requests, whichever comes first): streaming and non-streaming completions and
 * chats, clients that hang up mid-stream, connections dropped before the body is sent, oversize
 * prompts, malformed bodies, and — with a queue of one — 429s from overload. Every request ends in
 * exactly one class on the client side (done, cancelled, rejected, errored), and the server's
 * /metrics must close the same way: submitted = done + cancelled + errored, nothing left in a slot
 * or the queue. The server's resident memory is sampled; its growth after warm-up must stay under
 * --rss-bound-mib, and it must level off: its growth over the second half of the soak stays under
 * --second-half-bound-mib. The prompt cache is live throughout (greedy prompts share a prefix, and
 * a host cache of --cache-ram MiB, small by default so that it fills and evicts within the soak).
 * Exit 0: every check held; 1: one failed; 2: the soak could not run.
 *
 * Usage: npm run soak -- [--duration S] [--max-requests N] [--slots N] [--seed N] [--rss-bound-mib M] [--second-half-bound-mib M] [--cache-ram MiB] [--json FILE]
 */
import { connect } from "node:net";
import { readFileSync, writeFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { request } from "undici";
import { resolveModel } from "../harness/fixtures/registry.js";
import { SeededRandom } from "../harness/fixtures/seeded-random.js";
import { describeMachine, machineInfo } from "../harness/results/machine.js";
import { httpCall } from "../harness/sut/http-call.js";
import { startManagedServer, stopManagedServer, type ManagedServer } from "../harness/sut/managed-server.js";
import { OpenAiSseReader } from "../harness/load/sse-reader.js";
import { parsePrometheusText } from "../harness/conformance/prometheus.js";
import { BenchError } from "../harness/errors.js";

interface SoakOptions {
  readonly durationS: number;
  readonly maxRequests: number;
  readonly slots: number;
  readonly seed: number;
  readonly rssBoundMib: number;
  readonly secondHalfBoundMib: number;
  readonly cacheRamMib: number;
  readonly json: string | undefined;
}

function parseOptions(argv: readonly string[]): SoakOptions {
  const value = (name: string, fallback: number): number => {
    const at = argv.indexOf(name);
    if (at < 0) return fallback;
    const parsed = Number(argv[at + 1]);
    if (!Number.isFinite(parsed) || parsed <= 0) throw new BenchError(`${name} must be a positive number`, { field: name, fix: "e.g. --duration 600" });
    return parsed;
  };
  const jsonAt = argv.indexOf("--json");
  return {
    durationS: value("--duration", 600), maxRequests: value("--max-requests", 1_000_000), slots: Math.round(value("--slots", 2)),
    seed: Math.round(value("--seed", 1)), rssBoundMib: value("--rss-bound-mib", 64),
    secondHalfBoundMib: value("--second-half-bound-mib", 8), cacheRamMib: Math.round(value("--cache-ram", 4)), json: jsonAt < 0 ? undefined : argv[jsonAt + 1],
  };
}

/** What a client does; each kind has exactly one outcome it expects when the server is healthy. */
const KINDS = ["completion", "completion-stream", "chat", "chat-stream", "hang-up-mid-stream", "dropped-connection", "oversize-prompt", "malformed-body"] as const;
type Kind = (typeof KINDS)[number];
type Outcome = "done" | "cancelled" | "rejected" | "errored";

interface Tally {
  submitted: number;
  readonly outcomes: Record<Outcome, number>;
  /** Rejections by status: 429 (overload) and 400 (a bad request, refused with a reason). */
  readonly rejectedBy: Record<string, number>;
  readonly byKind: Record<string, number>;
  readonly errors: string[];
}

const OVERSIZE_PROMPT_TOKENS = 5000; // above bench serve's default --max-prompt-tokens (4096)
const MALFORMED = ["{", "[]", "null", '{"prompt": 3}', '{"prompt": "x", "max_tokens": -1}', '{"messages": []}', '{"prompt": "x", "stop": [""]}', "\u0000\u00ff"];

async function oneRequest(baseUrl: string, kind: Kind, random: SeededRandom): Promise<{ outcome: Outcome; status?: number; error?: string }> {
  const maxTokens = 1 + Math.floor(random.uniform() * 12);
  const stream = kind.endsWith("-stream") || kind === "hang-up-mid-stream";
  const chat = kind.startsWith("chat");
  const path = chat ? "/v1/chat/completions" : "/v1/completions";
  if (kind === "dropped-connection") return dropConnection(baseUrl, random);
  const body = kind === "malformed-body" ? MALFORMED[Math.floor(random.uniform() * MALFORMED.length)]
    : kind === "oversize-prompt" ? JSON.stringify({ prompt: Array.from({ length: OVERSIZE_PROMPT_TOKENS }, (_, i) => 3 + (i % 90)), max_tokens: 4 })
      : JSON.stringify({
        ...(chat ? { messages: [{ role: "user", content: `Say ${maxTokens} things.` }] } : { prompt: `The number ${Math.floor(random.uniform() * 1000)} is` }),
        max_tokens: maxTokens, temperature: random.uniform() < 0.5 ? 0 : 0.8, stream, ...(stream ? { stream_options: { include_usage: true } } : {}),
      });
  const controller = new AbortController();
  let response;
  try {
    response = await request(`${baseUrl}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body, signal: controller.signal, headersTimeout: 120_000, bodyTimeout: 120_000 });
  } catch (error) {
    return { outcome: "errored", error: `${kind}: no response: ${(error as Error).message}` };
  }
  const status = response.statusCode;
  if (status === 429) {
    await response.body.text();
    return { outcome: "rejected", status };
  }
  if (kind === "oversize-prompt" || kind === "malformed-body") {
    const text = await response.body.text();
    const reason = (() => { try { return (JSON.parse(text) as { error?: { message?: unknown } }).error?.message; } catch { return undefined; } })();
    if (status === 400 && typeof reason === "string") return { outcome: "rejected", status };
    return { outcome: "errored", status, error: `${kind}: expected 400 with a reason, got ${status} ${text.slice(0, 120)}` };
  }
  if (status !== 200) return { outcome: "errored", status, error: `${kind}: HTTP ${status} ${(await response.body.text()).slice(0, 120)}` };
  if (!stream) {
    const parsed = JSON.parse(await response.body.text()) as { choices?: unknown[]; usage?: { completion_tokens?: number } };
    const tokens = parsed.usage?.completion_tokens;
    if (!Array.isArray(parsed.choices) || parsed.choices.length !== 1 || typeof tokens !== "number" || tokens < 1 || tokens > maxTokens) {
      return { outcome: "errored", status, error: `${kind}: answer of the wrong shape: ${JSON.stringify(parsed).slice(0, 120)}` };
    }
    return { outcome: "done", status };
  }
  const reader = new OpenAiSseReader();
  try {
    for await (const chunk of response.body) {
      reader.push(chunk as Buffer, process.hrtime.bigint());
      if (kind === "hang-up-mid-stream" && reader.contentEventsNs.length > 0) {
        controller.abort();
        return { outcome: "cancelled", status };
      }
    }
  } catch (error) {
    return { outcome: "errored", status, error: `${kind}: stream broke: ${(error as Error).message}` };
  }
  if (kind === "hang-up-mid-stream") {
    // Finished before its first content event could be read: a short answer, whole.
    return reader.doneNs !== null && reader.failure === undefined ? { outcome: "done", status } : { outcome: "errored", status, error: `${kind}: ${reader.failure?.error ?? "no [DONE]"}` };
  }
  if (reader.failure !== undefined || reader.doneNs === null || reader.usage === null || reader.usage.completionTokens > maxTokens) {
    return { outcome: "errored", status, error: `${kind}: ${reader.failure?.error ?? (reader.doneNs === null ? "no [DONE]" : `usage ${JSON.stringify(reader.usage)}`)}` };
  }
  return { outcome: "done", status };
}

/** A client that sends headers and part of a body, then drops the connection. */
function dropConnection(baseUrl: string, random: SeededRandom): Promise<{ outcome: Outcome }> {
  const { hostname, port } = new URL(baseUrl);
  const partial = '{"prompt": "The quick brown fox", "max_tok';
  const cut = Math.floor(random.uniform() * partial.length);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname, () => {
      socket.write(`POST /v1/completions HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n${partial.slice(0, cut)}`);
      setTimeout(() => socket.destroy(), 5);
    });
    socket.on("error", () => undefined);
    socket.on("close", () => resolve({ outcome: "cancelled" }));
  });
}

function residentMib(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"));
  return Number(/(\d+)/.exec(line ?? "")?.[1] ?? NaN) / 1024;
}

/** The server's request counters and gauges, by name (read defensively: a renamed series is reported, not read as 0). */
async function serverBooks(baseUrl: string): Promise<Record<string, number>> {
  const samples = parsePrometheusText((await httpCall(`${baseUrl}/metrics`)).text);
  const read = (name: string): number => {
    const value = samples.get(name);
    if (value === undefined) throw new BenchError(`/metrics has no ${name}`, { fix: `the server's series are: ${[...samples.keys()].filter((k) => k.startsWith("bench_")).join(", ")}` });
    return value;
  };
  return {
    submitted: read("bench_requests_submitted_total"), done: read("bench_requests_done_total"), cancelled: read("bench_requests_cancelled_total"),
    errored: read("bench_requests_errored_total"), rejected: read("bench_requests_rejected_total"),
    slots_active: read("bench_slots_active"), queue_depth: read("bench_queue_depth"), in_flight: read("bench_in_flight"),
  };
}

/** The shortest soak whose second half says whether memory levelled off. */
const MIN_LEVEL_SECONDS = 120;

/** The host prompt cache's books on /metrics. */
async function hostCacheBooks(baseUrl: string): Promise<{ stores: number; hits: number; evictions: number; bytes: number }> {
  const samples = parsePrometheusText((await httpCall(`${baseUrl}/metrics`)).text);
  const read = (name: string) => samples.get(name) ?? NaN;
  return { stores: read("bench_prompt_cache_host_stores_total"), hits: read("bench_prompt_cache_host_hits_total"), evictions: read("bench_prompt_cache_host_evictions_total"), bytes: read("bench_prompt_cache_host_bytes") };
}

async function soak(options: SoakOptions): Promise<number> {
  const model = await resolveModel("tiny-random:F32");
  const server: ManagedServer = await startManagedServer({ modelPath: model.path, slots: options.slots, queue: 1, contextSize: 256, threads: 1, flashAttention: false, hostCacheMiB: options.cacheRamMib, bootTimeoutS: 120 });
  const pid = server.child.pid!;
  const concurrency = 2 * options.slots;
  const tally: Tally = { submitted: 0, outcomes: { done: 0, cancelled: 0, rejected: 0, errored: 0 }, rejectedBy: {}, byKind: {}, errors: [] };
  const random = new SeededRandom(options.seed);
  const startedMs = Date.now();
  const deadlineMs = startedMs + options.durationS * 1000;
  const rss: { tMs: number; mib: number }[] = [{ tMs: 0, mib: residentMib(pid) }];
  const sampler = setInterval(() => rss.push({ tMs: Date.now() - startedMs, mib: residentMib(pid) }), 1000);
  console.log(`soak: ${concurrency} clients (2 × ${options.slots} slots, queue 1) against bench serve ${model.id} for ${options.durationS} s, seed ${options.seed}`);
  let progressAt = Date.now();
  try {
    await Promise.all(Array.from({ length: concurrency }, async () => {
      while (Date.now() < deadlineMs && tally.submitted < options.maxRequests) {
        const kind = KINDS[Math.floor(random.uniform() * KINDS.length)];
        tally.submitted++;
        tally.byKind[kind] = (tally.byKind[kind] ?? 0) + 1;
        const result = await oneRequest(server.baseUrl, kind, random).catch((error: unknown) => ({ outcome: "errored" as const, status: undefined, error: `${kind}: ${String(error)}` }));
        tally.outcomes[result.outcome]++;
        if (result.outcome === "rejected") tally.rejectedBy[String(result.status)] = (tally.rejectedBy[String(result.status)] ?? 0) + 1;
        if ("error" in result && result.error !== undefined && tally.errors.length < 10) tally.errors.push(result.error);
        if (Date.now() - progressAt > 30_000) {
          progressAt = Date.now();
          console.log(`soak: ${Math.round((Date.now() - startedMs) / 1000)} s, ${tally.submitted} requests, RSS ${rss[rss.length - 1].mib.toFixed(1)} MiB`);
        }
      }
    }));
    clearInterval(sampler);
    // The server may still be reaping hung-up clients: give its books a moment to settle.
    let books = await serverBooks(server.baseUrl);
    for (let i = 0; i < 100 && (books.in_flight !== 0 || books.submitted !== books.done + books.cancelled + books.errored); i++) {
      await sleep(50);
      books = await serverBooks(server.baseUrl);
    }
    rss.push({ tMs: Date.now() - startedMs, mib: residentMib(pid) });
    const elapsedS = (Date.now() - startedMs) / 1000;
    // The warm-up is a share of the soak as it ran (a soak cut short by --max-requests included), so samples always follow it.
    const warmUpMs = Math.min(60_000, elapsedS * 1000 * 0.2);
    const afterWarmUp = rss.filter((s) => s.tMs >= warmUpMs);
    const baseMib = afterWarmUp[0]?.mib ?? rss[0].mib;
    const growthMib = Math.max(...afterWarmUp.map((s) => s.mib)) - baseMib;
    const secondHalf = rss.filter((s) => s.tMs >= (elapsedS * 1000) / 2);
    const secondHalfGrowthMib = Math.max(...secondHalf.map((s) => s.mib)) - secondHalf[0].mib;
    const hostCache = await hostCacheBooks(server.baseUrl);
    // A soak shorter than its warm-up's cap is still warming up in its second half: no level to reach.
    const levelDecided = elapsedS >= MIN_LEVEL_SECONDS;
    const o = tally.outcomes;
    const checks: [string, boolean][] = [
      [`client: submitted ${tally.submitted} = done ${o.done} + cancelled ${o.cancelled} + rejected ${o.rejected} + errored ${o.errored}`, tally.submitted === o.done + o.cancelled + o.rejected + o.errored],
      [`client: errored ${o.errored} = 0`, o.errored === 0],
      [`server: submitted ${books.submitted} = done ${books.done} + cancelled ${books.cancelled} + errored ${books.errored}; rejected ${books.rejected} at the cap`, books.submitted === books.done + books.cancelled + books.errored],
      [`server: errored ${books.errored} = 0`, books.errored === 0],
      [`server: slots active ${books.slots_active}, queue depth ${books.queue_depth}, in flight ${books.in_flight}: all 0 after the load`, books.slots_active === 0 && books.queue_depth === 0 && books.in_flight === 0],
      [`both: client 429s ${tally.rejectedBy["429"] ?? 0} ≤ server rejected ${books.rejected}; client done ${o.done} ≤ server done ${books.done}`, (tally.rejectedBy["429"] ?? 0) <= books.rejected && o.done <= books.done],
      [`both: server admitted + rejected ${books.submitted + books.rejected} ≤ client requests that could reach the engine ${tally.submitted - (tally.rejectedBy["400"] ?? 0)}`, books.submitted + books.rejected <= tally.submitted - (tally.rejectedBy["400"] ?? 0)],
      [`memory: RSS growth after ${(warmUpMs / 1000).toFixed(0)} s warm-up ${growthMib.toFixed(1)} MiB ≤ ${options.rssBoundMib} MiB (from ${baseMib.toFixed(1)} MiB)`, growthMib <= options.rssBoundMib],
      ...(levelDecided ? [[`memory: RSS growth over the second half ${secondHalfGrowthMib.toFixed(1)} MiB ≤ ${options.secondHalfBoundMib} MiB (levelled off)`, secondHalfGrowthMib <= options.secondHalfBoundMib] as [string, boolean]] : []),
      [`cache: the host prompt cache was used (${hostCache.stores} stores, ${hostCache.hits} hits, ${hostCache.evictions} evictions; ${(hostCache.bytes / 2 ** 20).toFixed(1)} of ${options.cacheRamMib} MiB)`, hostCache.stores > 0 && hostCache.bytes <= options.cacheRamMib * 2 ** 20],
      [`server: /health answers 200 after the soak`, (await httpCall(`${server.baseUrl}/health`)).status === 200],
    ];
    for (const error of tally.errors) console.log(`soak: error: ${error}`);
    for (const [line, ok] of checks) console.log(`soak: ${ok ? "PASS" : "FAIL"} ${line}`);
    if (!levelDecided) console.log(`soak: SKIP memory: whether RSS levels off (a soak under ${MIN_LEVEL_SECONDS} s is still warming up; second half +${secondHalfGrowthMib.toFixed(1)} MiB)`);
    const figures = {
      duration_s: Number(elapsedS.toFixed(1)), requests: tally.submitted, requests_per_second: Number((tally.submitted / elapsedS).toFixed(1)), by_kind: tally.byKind,
      client: { ...o, rejected_by_status: tally.rejectedBy }, server: books, rss_mib: { start: rss[0].mib, after_warm_up: baseMib, max: Math.max(...rss.map((s) => s.mib)), end: rss[rss.length - 1].mib, growth_after_warm_up: growthMib, bound: options.rssBoundMib, growth_over_second_half: secondHalfGrowthMib, second_half_bound: options.secondHalfBoundMib, curve: rss },
      host_cache: hostCache,
      machine: describeMachine(machineInfo()), seed: options.seed, passed: checks.every(([, ok]) => ok),
    };
    console.log(`soak: ${tally.submitted} requests in ${elapsedS.toFixed(0)} s (${figures.requests_per_second}/s) on ${figures.machine}: ${figures.passed ? "PASS" : "FAIL"}`);
    if (options.json !== undefined) writeFileSync(options.json, `${JSON.stringify(figures, null, 2)}\n`);
    return figures.passed ? 0 : 1;
  } finally {
    clearInterval(sampler);
    await stopManagedServer(server, 10);
  }
}

try {
  process.exitCode = await soak(parseOptions(process.argv.slice(2)));
} catch (error) {
  console.error(`soak: error: ${error instanceof BenchError ? error.oneLine() : (error as Error).stack}`);
  process.exitCode = 2;
}
