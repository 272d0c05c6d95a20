/**
 * npm run bench:conversations — the prompt cache at production scale, our server against
 * llama.cpp's llama-server (built from the source node-llama-cpp ships) side by side in one run:
 * 32 users × 6 turns on 4 slots (harness/load/conversations.ts: a shared system prompt, each user
 * back after all the others, one turn in seven an edit of the user's last message), 4 clients in a
 * closed loop, streamed greedy requests of 8 tokens. Both servers keep a host-memory prompt cache
 * (`--cache-ram`, each at its default). Per family's F32 fixture it prints, per side: prompt tokens
 * evaluated and cached, the share of requests that reused something, TTFT p50/p99 on hits and on
 * misses, the server's peak RSS; and checks every answer of ours against our server with the cache
 * off (the same greedy ids, or a first difference where the cold server's top two tokens lie within
 * the parity suites' near-tie band). Targets per family: ours evaluates no more prompt tokens than
 * llama-server, TTFT p99 ≤ 1.0 × llama-server's, no answer past a near-tie from the cold server's,
 * none lost.
 * Ends with one verdict line; exit 0 met, 1 missed, 2 could not run.
 *
 * BENCH_MODELS=a,b picks fixtures (default the five families); BENCH_USERS, BENCH_TURNS,
 * BENCH_THREADS override.
 */
import { resolveModel } from "../harness/fixtures/registry.js";
import { peakResidentBytes } from "../harness/io/procfs.js";
import { describeMachine, machineInfo } from "../harness/results/machine.js";
import { EXIT } from "../harness/results/exit-code.js";
import { distribution } from "../harness/stats/distribution.js";
import { conversationWorkload, type ConversationRequest } from "../harness/load/conversations.js";
import { openStreamEndpoint, streamRequest } from "../harness/load/sse-request.js";
import { requestMetrics } from "../harness/load/request-metrics.js";
import { departureFrom, NEAR_TIE_BAND_NATS, nearTie } from "../harness/load/near-tie.js";
import { startManagedServer, stopManagedServer, type ManagedServer } from "../harness/sut/managed-server.js";
import { buildLlamaServer } from "../harness/sut/llama-server-binary.js";
import { startLlamaServerBeside } from "./llama-server-beside.js";

const MODELS = (process.env.BENCH_MODELS ?? "tiny-random:F32,qwen35-tiny:F32,qwen35moe-tiny:F32,gemma4-tiny:F32,nemotron-h-moe-tiny:F32").split(",");
const USERS = Number(process.env.BENCH_USERS ?? 32);
const TURNS = Number(process.env.BENCH_TURNS ?? 6);
const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const SLOTS = 4;
const CLIENTS = 4;
const CONTEXT_PER_SLOT = 1024;
const OUTPUT_TOKENS = 8;
const SHAPE = { users: USERS, turns: TURNS, systemTokens: 96, messageTokens: 24, replyTokens: 16, editEvery: 7, idCeiling: 300, seed: 1 };

/** One request as a side answered it. */
interface Answered {
  readonly request: ConversationRequest;
  readonly ok: boolean;
  readonly ids: number[];
  readonly cached: number | undefined;
  readonly ttftMs: number | undefined;
}

interface SideResult {
  readonly answered: readonly Answered[];
  readonly peakRssBytes: number | undefined;
}

const body = (prompt: readonly number[], stream: boolean) => ({ model: "m", prompt, max_tokens: OUTPUT_TOKENS, temperature: 0, ignore_eos: true, stream, ...(stream ? { stream_options: { include_usage: true } } : {}) });

/** Every round of the workload through one server, CLIENTS requests at a time; a round ends before the next begins (a user's turns are in order). */
async function drive(server: ManagedServer, rounds: readonly ConversationRequest[][]): Promise<SideResult> {
  const endpoint = openStreamEndpoint(`${server.baseUrl}/v1/completions`);
  const answered: Answered[] = [];
  for (const round of rounds) {
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < round.length; i = next++) answered.push(await send(endpoint, round[i]));
    };
    await Promise.all(Array.from({ length: CLIENTS }, worker));
  }
  await endpoint.pool.close();
  return { answered, peakRssBytes: peakResidentBytes(server.child.pid!) };
}

async function send(endpoint: ReturnType<typeof openStreamEndpoint>, request: ConversationRequest): Promise<Answered> {
  const ids: number[] = [];
  let cached: number | undefined;
  const sample = await streamRequest(endpoint, 0, JSON.stringify(body(request.prompt, true)), process.hrtime.bigint(), (payload) => {
    if (payload === "[DONE]") return;
    const chunk = JSON.parse(payload) as { choices?: { token_ids?: number[] }[]; usage?: { prompt_tokens_details?: { cached_tokens?: number } } };
    ids.push(...(chunk.choices?.[0]?.token_ids ?? []));
    cached = chunk.usage?.prompt_tokens_details?.cached_tokens ?? cached;
  });
  const metrics = requestMetrics(sample);
  return { request, ok: sample.status === "ok" && sample.usage?.completionTokens === OUTPUT_TOKENS, ids, cached, ttftMs: metrics?.ttftMs };
}

/** Our answers against our server with the cache off: how many differ, and how many of those only at a near-tie. */
async function againstCold(cold: ManagedServer, answered: readonly Answered[]): Promise<{ differing: number; nearTies: number; gaps: number[] }> {
  const outcome = { differing: 0, nearTies: 0, gaps: [] as number[] };
  for (const a of answered) {
    const departure = await departureFrom(cold.baseUrl, body(a.request.prompt, false), a.ids);
    if (departure === undefined) continue;
    outcome.differing++;
    if (nearTie(departure.gap)) {
      outcome.nearTies++;
      outcome.gaps.push(departure.gap);
    }
  }
  return outcome;
}

interface Summary { prompt: number; cached: number; evaluated: number; hitShare: number; lost: number; unreported: number; ttftHits: ReturnType<typeof distribution>; ttftMisses: ReturnType<typeof distribution>; ttftAll: ReturnType<typeof distribution> }

function summarize(result: SideResult): Summary {
  const ok = result.answered.filter((a) => a.ok);
  const prompt = ok.reduce((sum, a) => sum + a.request.prompt.length, 0);
  const cached = ok.reduce((sum, a) => sum + (a.cached ?? 0), 0);
  const ttft = (which: readonly Answered[]) => distribution(which.flatMap((a) => (a.ttftMs === undefined ? [] : [a.ttftMs])));
  const hits = ok.filter((a) => (a.cached ?? 0) > 0);
  return {
    prompt, cached, evaluated: prompt - cached, hitShare: hits.length / Math.max(1, ok.length), lost: result.answered.length - ok.length,
    unreported: ok.filter((a) => a.cached === undefined).length, ttftHits: ttft(hits), ttftMisses: ttft(ok.filter((a) => !hits.includes(a))), ttftAll: ttft(ok),
  };
}

const ms = (d: ReturnType<typeof distribution>) => (d === undefined ? "n/a" : `p50 ${d.median.toFixed(1)} / p99 ${d.p99.toFixed(1)} ms (${d.n})`);
const mib = (bytes: number | undefined) => (bytes === undefined ? "n/a" : `${(bytes / 2 ** 20).toFixed(0)} MiB`);

function describe(side: string, s: Summary, rss: number | undefined): string {
  return `  ${side}: prompt tokens ${s.prompt}, cached ${s.cached}, evaluated ${s.evaluated}; ${(100 * s.hitShare).toFixed(0)}% of requests reused something; `
    + `TTFT hits ${ms(s.ttftHits)}, misses ${ms(s.ttftMisses)}; peak RSS ${mib(rss)}; lost ${s.lost}${s.unreported > 0 ? `; ${s.unreported} without cached_tokens` : ""}`;
}

async function benchFamily(modelId: string, llamaServerBin: string, servers: ManagedServer[]): Promise<{ met: boolean; line: string }> {
  const model = await resolveModel(modelId);
  const start = async (server: Promise<ManagedServer>) => {
    const started = await server;
    servers.push(started);
    return started;
  };
  const common = { modelPath: model.path, slots: SLOTS, queue: 64, contextSize: CONTEXT_PER_SLOT, threads: THREADS, flashAttention: false, kvCacheType: "F16" as const, bootTimeoutS: 120 };
  const ours = await start(startManagedServer(common));
  const llama = await start(startLlamaServerBeside(llamaServerBin, model.path, { slots: SLOTS, contextPerSlot: CONTEXT_PER_SLOT, threads: THREADS, bootTimeoutS: 120 }));
  const rounds = conversationWorkload(SHAPE);
  const oursResult = await drive(ours, rounds);
  const llamaResult = await drive(llama, rounds);
  for (const server of [ours, llama]) await stopManagedServer(server);
  const cold = await start(startManagedServer({ ...common, promptCache: false }));
  const comparison = await againstCold(cold, oursResult.answered.filter((a) => a.ok));
  const mismatches = comparison.differing - comparison.nearTies;
  await stopManagedServer(cold);
  const o = summarize(oursResult);
  const l = summarize(llamaResult);
  const evaluatedRatio = o.evaluated / Math.max(1, l.evaluated);
  const ttftRatio = (o.ttftAll?.p99 ?? NaN) / (l.ttftAll?.p99 ?? NaN);
  const met = evaluatedRatio <= 1 && ttftRatio <= 1 && mismatches === 0 && o.lost === 0 && l.lost === 0 && o.unreported === 0 && l.unreported === 0;
  console.log(`${modelId}:\n${describe("ours", o, oursResult.peakRssBytes)}\n${describe("llama-server", l, llamaResult.peakRssBytes)}\n`
    + `  prompt tokens evaluated ours/llama-server ${evaluatedRatio.toFixed(2)} (target ≤ 1.00); TTFT p99 ratio ${ttftRatio.toFixed(2)} (target ≤ 1.00); `
    + `answers differing from our cache-off server: ${comparison.differing} of ${oursResult.answered.length - o.lost}, ${comparison.nearTies} of them at a near-tie (top-2 gap ${comparison.gaps.map((g) => g.toFixed(3)).join(", ") || "-"} nats ≤ ${NEAR_TIE_BAND_NATS}) ${met ? "OK" : "BELOW TARGET"}`);
  return { met, line: `${modelId} ${met ? "met" : "missed"} (evaluated ×${evaluatedRatio.toFixed(2)}, TTFT p99 ×${ttftRatio.toFixed(2)}, ${mismatches} cold mismatches past a near-tie)` };
}

const servers: ManagedServer[] = [];
let verdict: { line: string; code: number };
try {
  const llamaServerBin = buildLlamaServer();
  console.log(`machine: ${describeMachine(machineInfo())}; ${USERS} users × ${TURNS} turns on ${SLOTS} slots, ${CLIENTS} clients, ${OUTPUT_TOKENS} tokens out, ${THREADS} threads, F16 KV, ${CONTEXT_PER_SLOT} tokens per slot; both servers with their host prompt cache at its default`);
  const families = [];
  for (const model of MODELS) families.push(await benchFamily(model, llamaServerBin, servers));
  const met = families.every((f) => f.met);
  verdict = { code: met ? EXIT.pass : EXIT.gateFailed, line: `bench:conversations verdict: ${met ? "PASS" : "FAIL"} — ${families.map((f) => f.line).join("; ")}` };
} catch (error) {
  verdict = { line: `bench:conversations verdict: ERROR — ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`, code: EXIT.error };
}
for (const server of servers) await stopManagedServer(server).catch(() => undefined);
console.log(verdict.line);
process.exit(verdict.code);
