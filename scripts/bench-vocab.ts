/**
 * npm run bench:vocab — what a real 151,936-row vocabulary costs, measured side by side in one run
 * against the char-vocabulary fixture of the same stack (qwen35-qwen3-vocab against qwen35-tiny),
 * each time with llama.cpp doing the same work as the floor:
 *
 * 1. making parity16's goldens (16 prompts, greedy T = 16, teacher-forced top-20): `bench goldens
 *    make` against raw node-llama-cpp doing the same evaluations (scripts/raw-llamacpp.ts);
 * 2. a parity16 battery on the embedded F32 arm (real-vocab's, and zoo's "qwen35 F32" on the same
 *    prompts, T, K and checks) against raw node-llama-cpp doing the arm's evaluations;
 * 3. our server against llama.cpp's llama-server on each fixture (same slots, threads, KV type and
 *    context): output tokens streamed per second over a closed-loop load of streamed greedy
 *    requests, and the server process's peak resident memory.
 *
 * Rows print each side's medians, harness/floor (wall and CPU) per fixture, and real/char per side.
 * BENCH_ROUNDS=N rounds per side (default 2); BENCH_REQUESTS requests per server round (default 32);
 * BENCH_LOGPROBS=K has every server request ask for its tokens' top-K log-probs (`logprobs: K`), what
 * an evaluation client asks; BENCH_TEMPERATURE=T (and BENCH_TOP_P=P) has every server request
 * sample at that temperature (and top_p), seeded, each server under its own sampler convention
 * (llama-server's chain adds its default top_k 40 and min_p 0.05); BENCH_PARTS=server measures the
 * server rows only; BENCH_CLIENTS=N closed-loop clients against the servers (default 4, the slots);
 * BENCH_VOCAB=gemma3 (with BENCH_PARTS=server) compares gemma4 on the 262,144-row Gemma 3 vocabulary
 * against gemma4 on the char vocabulary instead of the qwen35 pair.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { resolveModel, type ModelRef } from "../harness/fixtures/registry.js";
import { makeGoldens } from "../harness/goldens/make.js";
import { peakResidentBytes } from "../harness/io/procfs.js";
import { randomPrompts, type LoadPrompt } from "../harness/load/prompts.js";
import { runLoadPoint } from "../harness/load/run-load.js";
import { describeMachine, machineInfo } from "../harness/results/machine.js";
import { distribution } from "../harness/stats/distribution.js";
import { loadParitySuite } from "../harness/suites/load.js";
import type { ParitySuite } from "../harness/suites/parity-suite.js";
import { httpCall } from "../harness/sut/http-call.js";
import { startManagedServer, stopManagedServer, type ManagedServer } from "../harness/sut/managed-server.js";
import { buildLlamaServer } from "../harness/sut/llama-server-binary.js";
import { openRaw, type RawSession } from "./raw-llamacpp.js";
import { batteryTask, describeRatios, sideBySide, type SideBySide } from "./side-by-side.js";
import { startLlamaServerBeside } from "./llama-server-beside.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const LOGPROBS = Number(process.env.BENCH_LOGPROBS ?? 0);
if (!Number.isInteger(LOGPROBS) || LOGPROBS < 0) throw new Error(`BENCH_LOGPROBS=${process.env.BENCH_LOGPROBS}: give a whole number of top log-probs per token (0: none)`);
const TEMPERATURE = Number(process.env.BENCH_TEMPERATURE ?? 0);
if (!(TEMPERATURE >= 0 && TEMPERATURE <= 2)) throw new Error(`BENCH_TEMPERATURE=${process.env.BENCH_TEMPERATURE}: give a temperature from 0 (greedy) to 2`);
const TOP_P = Number(process.env.BENCH_TOP_P ?? 1);
if (!(TOP_P > 0 && TOP_P <= 1)) throw new Error(`BENCH_TOP_P=${process.env.BENCH_TOP_P}: give a top_p in (0, 1]`);
/** The requests' sampling settings, as the summary line names them. */
const SAMPLING = TEMPERATURE === 0 ? "greedy" : `sampled (temperature ${TEMPERATURE}${TOP_P < 1 ? `, top_p ${TOP_P}` : ""})`;
const SERVER_ONLY = process.env.BENCH_PARTS === "server";
if (process.env.BENCH_PARTS !== undefined && !SERVER_ONLY) throw new Error(`BENCH_PARTS=${process.env.BENCH_PARTS}: the only part that runs alone is "server"`);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 32);
const SLOTS = 4;
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? SLOTS);
if (!(Number.isInteger(CLIENTS) && CLIENTS >= 1 && CLIENTS <= SLOTS)) throw new Error(`BENCH_CLIENTS=${process.env.BENCH_CLIENTS}: give a whole number of clients from 1 to the ${SLOTS} slots`);
const SERVER_THREADS = 1;
const CONTEXT_PER_SLOT = 256;
const INPUT_TOKENS = 32;
const OUTPUT_TOKENS = 32;

/** The two fixtures, each with the parity suite and embedded F32 arm that hold it to its own goldens. */
/** Each fixture: the parity suite and embedded F32 arm that hold it to its goldens (the arm's model is the fixture). */
const PAIRS = {
  qwen3: [
    { name: "real vocab", suite: "real-vocab", arm: "qwen35 qwen3-vocab F32" },
    { name: "char vocab", suite: "zoo", arm: "qwen35 F32" },
  ],
  gemma3: [
    { name: "real vocab", suite: "real-vocab", arm: "gemma4 gemma3-vocab F32" },
    { name: "char vocab", suite: "zoo", arm: "gemma4 F32" },
  ],
} as const;
const VOCAB = process.env.BENCH_VOCAB ?? "qwen3";
if (!(VOCAB in PAIRS)) throw new Error(`BENCH_VOCAB=${VOCAB}: give one of ${Object.keys(PAIRS).join(", ")}`);
if (VOCAB !== "qwen3" && !SERVER_ONLY) throw new Error(`BENCH_VOCAB=${VOCAB} measures the server rows only: add BENCH_PARTS=server (the goldens and battery rows are the qwen3 pair's)`);
const FIXTURES = PAIRS[VOCAB as keyof typeof PAIRS];
type FixtureName = (typeof FIXTURES)[number]["name"];

/** The SUT evaluations a parity battery asks of an embedded arm: 3 rounds of greedy + teacher-forced (greedy_parity, determinism, the scored pass) and one more greedy (batch invariance's batch). */
async function paritySutWork(raw: RawSession, suite: ParitySuite): Promise<void> {
  const prompts = suite.prompts.map((text) => raw.tokenize(text));
  for (let round = 0; round < 3; round++) {
    for (const prompt of prompts) await raw.teacherForced(prompt, await raw.greedy(prompt, suite.max_tokens), suite.top_k);
  }
  for (const prompt of prompts) await raw.greedy(prompt, suite.max_tokens);
}

/** The evaluations goldens making does: greedy, then teacher forcing on that continuation, per prompt. */
async function goldensSutWork(raw: RawSession, suite: ParitySuite): Promise<void> {
  for (const text of suite.prompts) {
    const prompt = raw.tokenize(text);
    await raw.teacherForced(prompt, await raw.greedy(prompt, suite.max_tokens), suite.top_k);
  }
}

function withRaw(model: ModelRef, work: (raw: RawSession) => Promise<void>): () => Promise<void> {
  return async () => {
    const raw = await openRaw(model.path);
    try {
      await work(raw);
    } finally {
      await raw.close();
    }
  };
}

interface ServerFigures {
  readonly outputTokensPerSecond: number;
  readonly peakBytes: number | undefined;
  /** Streams that ended in an error, each with its first error text. */
  readonly failed: number;
  readonly firstError: string | undefined;
}

/**
 * A closed loop of streamed requests (greedy unless BENCH_TEMPERATURE says otherwise) against one server: output tokens streamed per second
 * (a stream the server ended early counts the tokens it did stream: that is the work it did), and
 * its process's peak resident memory after it. llama-server ends some streams on the real
 * vocabulary: its output parser refuses what a random model writes there ("does not match the
 * expected Content-only format"); they are counted and said, never hidden.
 */
async function loadServer(server: ManagedServer, prompts: readonly LoadPrompt[], seed: number): Promise<ServerFigures> {
  const body = (index: number) => ({ model: "m", prompt: prompts[index % prompts.length].prompt, max_tokens: OUTPUT_TOKENS, temperature: TEMPERATURE, ...(TOP_P < 1 ? { top_p: TOP_P } : {}), ...(TEMPERATURE > 0 ? { seed: index } : {}),
    ignore_eos: true, stream: true, stream_options: { include_usage: true }, ...(LOGPROBS > 0 ? { logprobs: LOGPROBS } : {}) });
  const result = await runLoadPoint({ url: `${server.baseUrl}/v1/completions`, body }, { mode: { kind: "closed", concurrency: CLIENTS }, requests: REQUESTS, warmup: 2, maxErrorRate: 1, seed });
  const streamed = result.samples.reduce((sum, sample) => sum + (sample.usage?.completionTokens ?? sample.clientTokens), 0);
  const failed = result.samples.filter((sample) => sample.status !== "ok");
  return { outputTokensPerSecond: streamed / result.durationS, peakBytes: server.child.pid === undefined ? undefined : peakResidentBytes(server.child.pid), failed: failed.length, firstError: failed[0]?.error ?? undefined };
}

/** Our server and llama-server on one fixture, with the same numerics and slots, rounds alternating. */
async function serverRow(model: ModelRef, llamaServer: string): Promise<Record<"ours" | "llama-server", { tps: number; peakBytes: number | undefined; failed: string }>> {
  const ours = await startManagedServer({ modelPath: model.path, slots: SLOTS, queue: REQUESTS, contextSize: CONTEXT_PER_SLOT, threads: SERVER_THREADS, flashAttention: false, kvCacheType: "F16", batchSize: 512, bootTimeoutS: 300 });
  let theirs: ManagedServer | undefined;
  try {
    theirs = await startLlamaServerBeside(llamaServer, model.path, { slots: SLOTS, contextPerSlot: CONTEXT_PER_SLOT, threads: SERVER_THREADS, batch: 512, bootTimeoutS: 300 });
    const tokenize = async (text: string) => (JSON.parse((await httpCall(`${ours.baseUrl}/tokenize`, { body: { content: text, add_special: true } })).text) as { tokens: number[] }).tokens;
    const prompts = await randomPrompts(REQUESTS + SLOTS, INPUT_TOKENS, OUTPUT_TOKENS, 1, tokenize);
    const rounds = { ours: [] as ServerFigures[], "llama-server": [] as ServerFigures[] };
    for (let round = 0; round < ROUNDS; round++) {
      rounds.ours.push(await loadServer(ours, prompts, round));
      rounds["llama-server"].push(await loadServer(theirs, prompts, round));
    }
    const figures = (side: keyof typeof rounds) => {
      const failed = rounds[side].reduce((sum, r) => sum + r.failed, 0);
      const error = rounds[side].find((r) => r.firstError !== undefined)?.firstError;
      return {
        tps: distribution(rounds[side].map((r) => r.outputTokensPerSecond))!.median, peakBytes: rounds[side].at(-1)!.peakBytes,
        failed: failed === 0 ? "" : ` (${failed} of ${REQUESTS * ROUNDS} streams ended early: ${error})`,
      };
    };
    return { ours: figures("ours"), "llama-server": figures("llama-server") };
  } finally {
    await stopManagedServer(ours);
    if (theirs !== undefined) await stopManagedServer(theirs);
  }
}

const mib = (bytes: number | undefined) => (bytes === undefined ? "n/a" : `${(bytes / 2 ** 20).toFixed(0)} MiB`);
const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

const llamaServer = buildLlamaServer();
const scratch = mkdtempSync(join(tmpdir(), "bench-vocab-"));
const goldens = new Map<FixtureName, SideBySide>();
const battery = new Map<FixtureName, SideBySide>();
const servers = new Map<FixtureName, Awaited<ReturnType<typeof serverRow>>>();
try {
  for (const fixture of FIXTURES) {
    const suite = loadParitySuite(fixture.suite);
    const model = await resolveModel(suite.arms.find((arm) => arm.label === fixture.arm)!.model);
    console.log(`\n${fixture.name}: ${model.id}`);
    servers.set(fixture.name, await serverRow(model, llamaServer));
    if (SERVER_ONLY) continue;
    goldens.set(fixture.name, await sideBySide(
      { name: `harness: bench goldens make --suite ${fixture.suite}`, run: () => makeGoldens(suite, model, join(scratch, fixture.suite)).then(() => undefined) },
      { name: "floor: raw node-llama-cpp, same evaluations", run: withRaw(model, (raw) => goldensSutWork(raw, suite)) },
      { iterations: ROUNDS },
    ));
    battery.set(fixture.name, await sideBySide(
      { name: `harness: bench run --suite ${fixture.suite} --arm "${fixture.arm}"`, run: batteryTask(fixture.suite, [fixture.arm], scratch) },
      { name: "floor: raw node-llama-cpp, the arm's evaluations", run: withRaw(model, (raw) => paritySutWork(raw, suite)) },
      { iterations: ROUNDS },
    ));
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}

const [real, char] = FIXTURES.map((f) => f.name);
console.log(`\nmachine: ${describeMachine(machineInfo())}, load average after ${loadavg().map((l) => l.toFixed(1)).join(" ")}; medians of ${ROUNDS} rounds per side`);
for (const [what, rows] of SERVER_ONLY ? [] : [["goldens making (parity16 prompts, T 16, K 20)", goldens], ["parity16 battery, embedded F32 arm", battery]] as const) {
  const [r, c] = [rows.get(real)!, rows.get(char)!];
  console.log(`${what}:\n  ${real}: harness ${seconds(r.harnessMs)} (CPU ${seconds(r.harnessCpuMs)}), floor ${seconds(r.rawMs)} (CPU ${seconds(r.rawCpuMs)}) — ${describeRatios(r)}` +
    `\n  ${char}: harness ${seconds(c.harnessMs)} (CPU ${seconds(c.harnessCpuMs)}), floor ${seconds(c.rawMs)} (CPU ${seconds(c.rawCpuMs)}) — ${describeRatios(c)}` +
    `\n  ${real} / ${char}: harness wall ×${(r.harnessMs / c.harnessMs).toFixed(2)} CPU ×${(r.harnessCpuMs / c.harnessCpuMs).toFixed(2)}; floor wall ×${(r.rawMs / c.rawMs).toFixed(2)} CPU ×${(r.rawCpuMs / c.rawCpuMs).toFixed(2)}`);
}
const [rs, cs] = [servers.get(real)!, servers.get(char)!];
console.log(`server (${SLOTS} slots, ${SERVER_THREADS} thread, F16 KV, ${REQUESTS} streamed ${SAMPLING} requests of ${INPUT_TOKENS}/${OUTPUT_TOKENS} tokens${LOGPROBS > 0 ? `, each token with its top-${LOGPROBS} log-probs` : ""} at ${CLIENTS} clients):` +
  `\n  ${real}: ours ${rs.ours.tps.toFixed(0)} tok/s, peak RSS ${mib(rs.ours.peakBytes)}${rs.ours.failed}; llama-server ${rs["llama-server"].tps.toFixed(0)} tok/s, peak RSS ${mib(rs["llama-server"].peakBytes)}${rs["llama-server"].failed} — ours/llama-server tok/s ${(rs.ours.tps / rs["llama-server"].tps).toFixed(2)}` +
  `\n  ${char}: ours ${cs.ours.tps.toFixed(0)} tok/s, peak RSS ${mib(cs.ours.peakBytes)}${cs.ours.failed}; llama-server ${cs["llama-server"].tps.toFixed(0)} tok/s, peak RSS ${mib(cs["llama-server"].peakBytes)}${cs["llama-server"].failed} — ours/llama-server tok/s ${(cs.ours.tps / cs["llama-server"].tps).toFixed(2)}` +
  `\n  ${real} / ${char}: ours tok/s ×${(rs.ours.tps / cs.ours.tps).toFixed(2)}, llama-server tok/s ×${(rs["llama-server"].tps / cs["llama-server"].tps).toFixed(2)}`);
