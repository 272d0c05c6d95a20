/**
 * npm run bench:workload — our server against llama.cpp's own llama-server on a user's workload
 * rather than the benchmark's (issue #45): a real-vocabulary fixture, every request streamed, half
 * greedy and half sampled (temperature 0.7, top_p 0.95, each with its own seed), prompts spread
 * log-uniformly from 50 to 4,000 tokens (both ends in every point), 32 tokens out (ignore_eos).
 * Closed loop at 1, 4, 16 and 64 clients, then open loop (Poisson arrivals) at several rates; both
 * servers side by side in one run with the same slots, threads, KV type (F16), batch, flash
 * attention (off) and context per slot (the longest prompt plus the output, rounded up to 256:
 * llama.cpp pads its context to 256 cells, and node-llama-cpp's context then disagrees with
 * llama.cpp's, which costs ours its addon). Each point sends both servers the same requests, the
 * side that goes first alternating; a round measured while other processes kept the machine busy is
 * measured again (scripts/quiet-rounds.ts) with fresh prompts of the same lengths, so no prompt
 * cache answers it.
 *
 * Per point and side: output tok/s (every token streamed, a lost request's included), TTFT and ITL
 * (gaps between streamed chunks) p50/p99, goodput under the SLO the output states, the server
 * process's peak RSS during the point (VmHWM, reset before it), its CPU per token, lost requests by
 * reason — each as a ratio to llama-server; then a table of every point and one verdict line against
 * the issue's targets (tok/s ≥ 1.0×, TTFT p99 ≤ 1.0×, ITL p99 ≤ 1.1×, peak RSS ≤ llama-server's
 * + 200 MiB, no request of ours lost): exit 0 met, 1 missed, 2 (one line, no stack) when a server or
 * the setup broke. llama-server answers HTTP 500 when its generated text is not valid UTF-8
 * (docs/servers.md); that is its lost request, counted and said apart with its reason.
 *
 * Sampling: sampled requests send top_k 0 and min_p 0 (off) to both servers, so both draw from
 * temperature 0.7 and top_p 0.95 alone, the workload as stated; llama-server's default chain would
 * add top_k 40 and min_p 0.05, cutting the 262,144-row vocabulary to a few tokens before top_p —
 * another, cheaper distribution than the one asked for. Each server keeps its own order of the
 * temperature and the cuts (ours tempers first, as OpenAI documents; llama.cpp's chain last).
 *
 * BENCH_VOCAB: the fixture (default gemma4-gemma3-vocab:F32; gemma3, qwen3, llama3 name the three
 * real-vocabulary fixtures; any model reference `bench` takes works); BENCH_CLIENTS=1,4,16,64 closed-
 * loop points; BENCH_RATES=… open-loop requests per second (empty: none); BENCH_REQUESTS requests
 * per point (a closed point sends at least 2 per client); BENCH_SLOTS (4), BENCH_THREADS (2),
 * BENCH_OUTPUT_TOKENS (32), BENCH_PROMPT_MIN / BENCH_PROMPT_MAX (50 / 4000); BENCH_SLO_TTFT_MS and
 * BENCH_SLO_ITL_MS the goodput SLO; BENCH_STALL_S how long a silent server is waited on before the
 * request is lost (300). BENCH_BUSY_ATTEMPTS=1 measures every round once (a shared machine).
 * BENCH_TRACE_FILE=PATH has ours write its step trace there (docs/step-trace.md), to take its
 * time apart.
 */
import { loadavg } from "node:os";
import { resolve } from "node:path";
import { BenchError } from "../harness/errors.js";
import { resolveModel } from "../harness/fixtures/registry.js";
import { cpuSeconds, peakResidentBytes, resetPeakResident } from "../harness/io/procfs.js";
import type { Slo } from "../harness/load/aggregate.js";
import { promptsOfLengths, spreadPromptLengths, type LoadPrompt } from "../harness/load/prompts.js";
import { modeLabel, runLoadPoint, type LoadMode } from "../harness/load/run-load.js";
import { EXIT } from "../harness/results/exit-code.js";
import { describeMachine, machineInfo } from "../harness/results/machine.js";
import { distribution, type Distribution } from "../harness/stats/distribution.js";
import { httpCall } from "../harness/sut/http-call.js";
import { buildLlamaServer } from "../harness/sut/llama-server-binary.js";
import { startManagedServer, stopManagedServer, type ManagedServer } from "../harness/sut/managed-server.js";
import { numberListFromEnv, positiveNumberFromEnv, wholeNumberFromEnv } from "./bench-env.js";
import { quietRound } from "./quiet-rounds.js";
import { describeLosses, describeRatio, judgePoint, lostCount, sideFigures, TARGETS, workloadVerdict, type JudgedPoint, type SideFigures } from "./workload-verdict.js";
import { startLlamaServerBeside } from "./llama-server-beside.js";

const REAL_VOCABULARIES: Readonly<Record<string, string>> = { gemma3: "gemma4-gemma3-vocab:F32", qwen3: "qwen35-qwen3-vocab:F32", llama3: "llama-llama3-vocab:F32" };
const SIDES = ["ours", "llama-server"] as const;
type Side = (typeof SIDES)[number];
const BATCH = 512;
const SAMPLED = { temperature: 0.7, top_p: 0.95, top_k: 0, min_p: 0 } as const;
/** llama.cpp pads a context to a multiple of this many cells. */
const CONTEXT_PAD = 256;

function settingsFromEnv() {
  const vocab = process.env.BENCH_VOCAB ?? "gemma3";
  const promptMin = wholeNumberFromEnv("BENCH_PROMPT_MIN", 50);
  const promptMax = wholeNumberFromEnv("BENCH_PROMPT_MAX", 4000);
  if (promptMin > promptMax) throw new BenchError(`BENCH_PROMPT_MIN ${promptMin} is above BENCH_PROMPT_MAX ${promptMax}`, { field: "BENCH_PROMPT_MIN", fix: "give a shortest prompt no longer than the longest" });
  const outputTokens = wholeNumberFromEnv("BENCH_OUTPUT_TOKENS", 32);
  const slots = wholeNumberFromEnv("BENCH_SLOTS", 4);
  return {
    model: REAL_VOCABULARIES[vocab] ?? vocab,
    clients: numberListFromEnv("BENCH_CLIENTS", [1, 4, 16, 64], true),
    rates: numberListFromEnv("BENCH_RATES", [0.25, 0.5, 1], false),
    requests: wholeNumberFromEnv("BENCH_REQUESTS", 16),
    slots,
    threads: wholeNumberFromEnv("BENCH_THREADS", 2),
    outputTokens,
    promptMin,
    promptMax,
    contextPerSlot: Math.ceil((promptMax + outputTokens) / CONTEXT_PAD) * CONTEXT_PAD,
    slo: { ttftMs: positiveNumberFromEnv("BENCH_SLO_TTFT_MS", 5_000), interChunkP99Ms: positiveNumberFromEnv("BENCH_SLO_ITL_MS", 500) } satisfies Slo,
    stallTimeoutMs: wholeNumberFromEnv("BENCH_STALL_S", 300) * 1000,
    traceSteps: process.env.BENCH_TRACE_FILE === undefined || process.env.BENCH_TRACE_FILE === "" ? undefined : resolve(process.env.BENCH_TRACE_FILE),
  };
}
type Settings = ReturnType<typeof settingsFromEnv>;

interface Point {
  readonly mode: LoadMode;
  readonly requests: number;
}

function pointsOf(settings: Settings): Point[] {
  if (settings.clients.length + settings.rates.length === 0) throw new BenchError("no load point to measure", { field: "BENCH_CLIENTS, BENCH_RATES", fix: "leave one of them unset, or give e.g. BENCH_CLIENTS=1,4" });
  return [
    ...settings.clients.map((clients) => ({ mode: { kind: "closed", concurrency: clients } as const, requests: Math.max(settings.requests, 2 * clients) })),
    ...settings.rates.map((rate) => ({ mode: { kind: "open", rate, burstiness: 1 } as const, requests: settings.requests })),
  ];
}

const pointLabel = (mode: LoadMode) => (mode.kind === "closed" ? `closed ${mode.concurrency}` : `open ${mode.rate}/s`);
const loadAverage = () => loadavg().map((l) => l.toFixed(1)).join(" ");
const MIB = 2 ** 20;
const mib = (bytes: number | undefined) => (bytes === undefined ? "n/a" : (bytes / MIB).toFixed(0));
const ms = (d: Distribution | undefined, key: "median" | "p99") => (d === undefined ? "n/a" : d[key].toFixed(0));

/** The i-th request of a point: half greedy, half sampled (odd indices), each sampled one seeded by its index. */
function requestBody(prompt: LoadPrompt, index: number) {
  return {
    model: "m", prompt: prompt.prompt, max_tokens: prompt.maxTokens, ignore_eos: true, stream: true, stream_options: { include_usage: true },
    ...(index % 2 === 1 ? { ...SAMPLED, seed: index } : { temperature: 0 }),
  };
}

/** Every round of the run, as the verdict line counts them. */
const rounds = { total: 0, repeated: 0, stillBusy: 0 };

async function measurePoint(servers: Record<Side, ManagedServer>, point: Point, pointIndex: number, settings: Settings, tokenize: (text: string) => Promise<number[]>): Promise<JudgedPoint> {
  const lengths = spreadPromptLengths(point.requests, settings.promptMin, settings.promptMax, 1000 + pointIndex);
  // The words of attempt a of this point, shared by both sides: a round measured again gets fresh ones (same lengths), so no prompt cache answers it.
  const promptsByAttempt = new Map<number, Promise<LoadPrompt[]>>();
  const promptsOf = (attempt: number) => {
    if (!promptsByAttempt.has(attempt)) promptsByAttempt.set(attempt, promptsOfLengths(lengths, settings.outputTokens, (pointIndex + 1) * 1000 + attempt, tokenize));
    return promptsByAttempt.get(attempt)!;
  };
  const label = pointLabel(point.mode);
  const sampled = Math.floor(point.requests / 2);
  const lengthSpread = distribution(lengths)!;
  console.log(`\n${label} (${modeLabel(point.mode)}): ${point.requests} requests, ${sampled} sampled, prompts ${lengthSpread.min}–${lengthSpread.max} tokens (median ${lengthSpread.median.toFixed(0)}), ${settings.outputTokens} out; load average ${loadAverage()}`);
  const figures: Partial<Record<Side, SideFigures>> = {};
  for (const side of pointIndex % 2 === 0 ? SIDES : [...SIDES].reverse()) {
    const pid = servers[side].child.pid!;
    let attempt = 0;
    const measured = await quietRound(async () => {
      const prompts = await promptsOf(attempt++);
      const resetPeak = resetPeakResident(pid);
      const cpuBefore = cpuSeconds(pid);
      const result = await runLoadPoint({ url: `${servers[side].baseUrl}/v1/completions`, body: (i) => requestBody(prompts[i], i), stallTimeoutMs: settings.stallTimeoutMs },
        { mode: point.mode, requests: point.requests, warmup: 0, maxErrorRate: 1, seed: pointIndex });
      const peak = peakResidentBytes(pid);
      return sideFigures(result.samples, result.durationS, settings.slo, { peakRssBytes: resetPeak ? peak : undefined, cpuSeconds: cpuSeconds(pid) - cpuBefore });
    }, (foreignCores, tried) => console.log(`  ${side}: other processes used ${foreignCores.toFixed(2)} cores meanwhile; measuring it again with fresh prompts (attempt ${tried + 1})`));
    rounds.total++;
    if (measured.attempts > 1) rounds.repeated++;
    if (measured.busy) rounds.stillBusy++;
    figures[side] = measured.value;
  }
  const ours = figures.ours!;
  const theirs = figures["llama-server"]!;
  const judgement = judgePoint(ours, theirs, point.mode.kind === "closed");
  const row = (name: string, o: string, t: string, r: string) => `  ${name.padEnd(22)}${o.padEnd(16)}${t.padEnd(16)}${r}`;
  const target = (within: boolean, text: string) => `${text}${within ? "" : " MISSED"}`;
  const lost = (f: SideFigures) => `${lostCount(f)} of ${f.sent}`;
  console.log(row("", "ours", "llama-server", "ours / llama-server"));
  console.log(row("output tok/s", ours.outputTokensPerSecond.toFixed(1), theirs.outputTokensPerSecond.toFixed(1), judgement.throughputJudged
    ? target(judgement.tokensPerSecondRatio >= TARGETS.tokensPerSecondRatio, `${describeRatio(judgement.tokensPerSecondRatio, TARGETS.tokensPerSecondRatio)} (target ≥ ${TARGETS.tokensPerSecondRatio.toFixed(1)}×)`)
    : `${describeRatio(judgement.tokensPerSecondRatio)} (open loop: the arrival rate sets it, not judged)`));
  console.log(row("TTFT p50 / p99 ms", `${ms(ours.ttftMs, "median")} / ${ms(ours.ttftMs, "p99")}`, `${ms(theirs.ttftMs, "median")} / ${ms(theirs.ttftMs, "p99")}`,
    target(judgement.ttftP99Ratio <= TARGETS.ttftP99Ratio, `p99 ${describeRatio(judgement.ttftP99Ratio, TARGETS.ttftP99Ratio)} (target ≤ ${TARGETS.ttftP99Ratio.toFixed(1)}×)`)));
  console.log(row("ITL p50 / p99 ms", `${ms(ours.itlMs, "median")} / ${ms(ours.itlMs, "p99")}`, `${ms(theirs.itlMs, "median")} / ${ms(theirs.itlMs, "p99")}`,
    target(judgement.itlP99Ratio <= TARGETS.itlP99Ratio, `p99 ${describeRatio(judgement.itlP99Ratio, TARGETS.itlP99Ratio)} (target ≤ ${TARGETS.itlP99Ratio.toFixed(1)}×)`)));
  console.log(row("goodput req/s (good)", `${ours.goodputPerSecond.toFixed(3)} (${ours.good})`, `${theirs.goodputPerSecond.toFixed(3)} (${theirs.good})`, describeRatio(judgement.goodputRatio)));
  console.log(row("peak RSS MiB", mib(ours.peakRssBytes), mib(theirs.peakRssBytes),
    target(judgement.peakRssAboveMiB <= TARGETS.peakRssAboveMiB, `${Number.isFinite(judgement.peakRssAboveMiB) ? `${judgement.peakRssAboveMiB >= 0 ? "+" : ""}${judgement.peakRssAboveMiB.toFixed(0)} MiB` : "not measured"} (target ≤ +${TARGETS.peakRssAboveMiB} MiB)`)));
  console.log(row("server CPU ms/token", ours.cpuMsPerToken.toFixed(1), theirs.cpuMsPerToken.toFixed(1), describeRatio(ours.cpuMsPerToken / theirs.cpuMsPerToken)));
  console.log(row("lost", lost(ours), lost(theirs), lostCount(ours) > 0 ? "MISSED (target: none)" : ""));
  for (const [side, f] of [["ours", ours], ["llama-server", theirs]] as const) if (lostCount(f) > 0) console.log(`    ${side} lost ${describeLosses(f.losses)}`);
  return { label, ours, theirs, judgement };
}

/** One row per point, the ratios a reader compares runs by (docs/performance.md holds one). */
function describeTable(points: readonly JudgedPoint[]): string {
  const lines = [
    "| point | output tok/s ours / llama-server | TTFT p99 ms | ITL p99 ms | goodput req/s | peak RSS MiB | lost ours / llama-server | targets missed |",
    "|---|---|---|---|---|---|---|---|",
  ];
  for (const { label, ours, theirs, judgement } of points) {
    const throughput = judgement.throughputJudged ? describeRatio(judgement.tokensPerSecondRatio, TARGETS.tokensPerSecondRatio) : `${describeRatio(judgement.tokensPerSecondRatio)}, open loop: not judged`;
    lines.push(`| ${label} | ${ours.outputTokensPerSecond.toFixed(1)} / ${theirs.outputTokensPerSecond.toFixed(1)} (${throughput}) `
      + `| ${ms(ours.ttftMs, "p99")} / ${ms(theirs.ttftMs, "p99")} (${describeRatio(judgement.ttftP99Ratio, TARGETS.ttftP99Ratio)}) | ${ms(ours.itlMs, "p99")} / ${ms(theirs.itlMs, "p99")} (${describeRatio(judgement.itlP99Ratio, TARGETS.itlP99Ratio)}) `
      + `| ${ours.goodputPerSecond.toFixed(3)} / ${theirs.goodputPerSecond.toFixed(3)} (${describeRatio(judgement.goodputRatio)}) | ${mib(ours.peakRssBytes)} / ${mib(theirs.peakRssBytes)} `
      + `| ${lostCount(ours)} / ${lostCount(theirs)} of ${ours.sent} | ${judgement.misses.length === 0 ? "none" : judgement.misses.join(", ")} |`);
  }
  return lines.join("\n");
}

async function warmUp(server: ManagedServer, prompt: LoadPrompt, settings: Settings): Promise<void> {
  // The first decode of each kind (greedy, sampled) is not a point's: kernels, the sampler's buffers, the pool's threads.
  const result = await runLoadPoint({ url: `${server.baseUrl}/v1/completions`, body: (i) => requestBody(prompt, i), stallTimeoutMs: settings.stallTimeoutMs },
    { mode: { kind: "closed", concurrency: 1 }, requests: 2, warmup: 0, maxErrorRate: 1, seed: 0 });
  const failed = result.samples.find((sample) => sample.status !== "ok" && !/Content-only format/.test(sample.error ?? ""));
  if (failed !== undefined) throw new Error(`a warm-up request failed: ${failed.status} ${failed.error ?? ""}`);
}

const oneLine = (error: unknown) => (error instanceof BenchError ? error.oneLine() : error instanceof Error ? error.message.split("\n")[0] : String(error));

/** A server's start, its failure named by side: "the server exited" alone does not say which. */
async function started(side: Side, start: () => Promise<ManagedServer>): Promise<ManagedServer> {
  try {
    return await start();
  } catch (error) {
    throw new Error(`${side === "ours" ? "ours (bench serve)" : side}: ${oneLine(error)}`);
  }
}

const servers: Partial<Record<Side, ManagedServer>> = {};
const judged: JudgedPoint[] = [];
let verdict: { line: string; code: number };
try {
  const settings = settingsFromEnv();
  const model = await resolveModel(settings.model);
  const points = pointsOf(settings);
  const mostInFlight = Math.max(...points.map((p) => p.requests));
  servers.ours = await started("ours", () => startManagedServer({ modelPath: model.path, slots: settings.slots, queue: mostInFlight, contextSize: settings.contextPerSlot, threads: settings.threads,
    flashAttention: false, kvCacheType: "F16", batchSize: BATCH, traceSteps: settings.traceSteps, bootTimeoutS: 300 }));
  const llamaServerBin = buildLlamaServer();
  servers["llama-server"] = await started("llama-server", () => startLlamaServerBeside(llamaServerBin, model.path, { slots: settings.slots, contextPerSlot: settings.contextPerSlot, threads: settings.threads, batch: BATCH, bootTimeoutS: 300 }));
  const oursUrl = servers.ours.baseUrl;
  const tokenize = async (text: string) => (JSON.parse((await httpCall(`${oursUrl}/tokenize`, { body: { content: text, add_special: true } })).text) as { tokens: number[] }).tokens;
  console.log(`machine: ${describeMachine(machineInfo())}; load average ${loadAverage()}`);
  console.log(`model ${model.id}; both servers: ${settings.slots} slots, ${settings.threads} thread${settings.threads === 1 ? "" : "s"}, F16 KV, flash attention off, batch ${BATCH}, ${settings.contextPerSlot} tokens per slot, prompt caches at their defaults (on)`);
  console.log(`requests: streamed /v1/completions, token-id prompts ${settings.promptMin}–${settings.promptMax} tokens (log-uniform, seeded), ${settings.outputTokens} tokens out (ignore_eos); half greedy, half sampled at temperature ${SAMPLED.temperature}, top_p ${SAMPLED.top_p} with top_k ${SAMPLED.top_k} and min_p ${SAMPLED.min_p} sent to both (llama-server's defaults would add top_k 40, min_p 0.05), a seed each`);
  console.log(`goodput SLO: a completed request with TTFT ≤ ${settings.slo.ttftMs} ms and its own ITL p99 ≤ ${settings.slo.interChunkP99Ms} ms (BENCH_SLO_TTFT_MS, BENCH_SLO_ITL_MS); ITL = gaps between streamed chunks`);
  const [warmPrompt] = await promptsOfLengths([settings.promptMin], settings.outputTokens, 1, tokenize);
  for (const side of SIDES) await warmUp(servers[side]!, warmPrompt, settings);
  const warm = (side: Side) => mib(peakResidentBytes(servers[side]!.child.pid!));
  console.log(`peak RSS after boot and warm-up: ours ${warm("ours")} MiB, llama-server ${warm("llama-server")} MiB; each point's peak below is the server's during that point alone (VmHWM, reset before it)`);
  for (const [index, point] of points.entries()) judged.push(await measurePoint(servers as Record<Side, ManagedServer>, point, index, settings, tokenize));
  console.log(`\n${describeTable(judged)}\n\nload average after: ${loadAverage()}`);
  verdict = workloadVerdict(judged, rounds);
} catch (error) {
  verdict = { line: `bench:workload verdict: ERROR — ${oneLine(error)} (after ${judged.length} points)`, code: EXIT.error };
}
for (const [side, server] of Object.entries(servers)) {
  await stopManagedServer(server).catch((error: Error) => console.log(`note: stopping ${side}: ${error.message}`));
}
console.log(verdict.line);
process.exit(verdict.code);
