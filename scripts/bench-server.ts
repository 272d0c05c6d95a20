/**
 * npm run bench:server — our server against llama.cpp's own llama-server (built from the llama.cpp
 * source node-llama-cpp ships, scripts/build-llama-server.sh), side by side in one run on the same
 * fixture and settings: 4 slots, 2 threads, flash attention off, F16 KV, 256 tokens per slot.
 * Closed loop at 1, 4 and 16 clients, 64 streamed greedy requests of 32 prompt / 64 output
 * tokens (ignore_eos), the two servers' rounds alternating so a busy stretch of a shared machine
 * hits both. Prints output tok/s and TTFT p99 per round and the ratios of the medians.
 * Targets: output tok/s ≥ 0.9 × llama-server's, TTFT p99 ≤ 1.2 ×.
 *
 * BENCH_ROUNDS=N rounds per point (default 3); BENCH_CONCURRENCY=1,4 to pick points;
 * BENCH_PROMPT_CACHE=off starts ours with --no-prompt-cache (on by default, as `bench serve`);
 * BENCH_REQUESTS and BENCH_THREADS override the request count and threads (on an oversubscribed
 * machine llama.cpp's spinning thread barriers make 2-thread steps take up to seconds, on both sides).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { loadavg } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { resolveModel } from "../harness/fixtures/registry.js";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { describeMachine, machineInfo } from "../harness/results/machine.js";
import { distribution } from "../harness/stats/distribution.js";
import { summarizeLoadPoint } from "../harness/load/aggregate.js";
import { randomPrompts } from "../harness/load/prompts.js";
import { requestMetrics } from "../harness/load/request-metrics.js";
import { runLoadPoint } from "../harness/load/run-load.js";
import { httpCall, startManagedServer, stopManagedServer } from "../harness/sut/http.js";
import { decodeFloors, describeFloors } from "./decode-floor.js";

const SLOTS = 4;
const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const CONTEXT_PER_SLOT = 256;
const BATCH = 512;
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 64);
const INPUT_TOKENS = 32;
const OUTPUT_TOKENS = 64;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? "1,4,16").split(",").map(Number);
const PROMPT_CACHE = process.env.BENCH_PROMPT_CACHE !== "off";
const TARGET_TPS_RATIO = 0.9;
const TARGET_TTFT_P99_RATIO = 1.2;

const model = await resolveModel("tiny-random:F32");

const build = spawnSync(join(PACKAGE_ROOT, "scripts", "build-llama-server.sh"), { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
if (build.status !== 0) {
  console.error(`bench:server: scripts/build-llama-server.sh exited ${build.status}: no llama-server to compare against`);
  process.exit(2);
}
const llamaServerBin = build.stdout.trim().split("\n").at(-1)!;

async function waitHealthy(baseUrl: string, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    if (child.exitCode !== null) throw new Error(`llama-server exited ${child.exitCode} while booting`);
    const status = await httpCall(`${baseUrl}/health`).then((r) => r.status, () => 0);
    if (status === 200) return;
    await sleep(100);
  }
  throw new Error("llama-server never became healthy");
}

/** llama-server with our server's settings; its context is shared by the slots, ours is per slot. */
async function startLlamaServer(port: number): Promise<{ baseUrl: string; stop: () => Promise<void> }> {
  const child = spawn(llamaServerBin, ["-m", model.path, "--host", "127.0.0.1", "--port", String(port), "-np", String(SLOTS), "-c", String(CONTEXT_PER_SLOT * SLOTS),
    "-t", String(THREADS), "-tb", String(THREADS), "-fa", "off", "-b", String(BATCH), "-ctk", "f16", "-ctv", "f16", "--no-warmup"], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => { stderr = (stderr + chunk.toString()).slice(-4000); });
  const baseUrl = `http://127.0.0.1:${port}`;
  await waitHealthy(baseUrl, child).catch((error: Error) => { child.kill("SIGKILL"); throw new Error(`${error.message}\n${stderr}`); });
  return {
    baseUrl,
    stop: async () => {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
    },
  };
}

const ours = await startManagedServer({ modelPath: model.path, slots: SLOTS, queue: 64, contextSize: CONTEXT_PER_SLOT, threads: THREADS, flashAttention: false, kvCacheType: "F16", batchSize: BATCH, promptCache: PROMPT_CACHE, bootTimeoutS: 120 });
const llama = await startLlamaServer(18_000 + Math.floor(Math.random() * 20_000));
try {
  const tokenize = async (text: string) => (JSON.parse((await httpCall(`${ours.baseUrl}/tokenize`, { body: { content: text } })).text) as { tokens: number[] }).tokens;
  const prompts = await randomPrompts(REQUESTS + 2, INPUT_TOKENS, OUTPUT_TOKENS, 1, tokenize);
  const body = (index: number) => ({ model: "m", prompt: prompts[index % prompts.length].prompt, max_tokens: OUTPUT_TOKENS, temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true } });
  const sides = [["ours", ours.baseUrl], ["llama-server", llama.baseUrl]] as const;
  console.log(`machine: ${describeMachine(machineInfo())}; model ${model.id}; ours with the prompt cache ${PROMPT_CACHE ? "on" : "off"}; ${SLOTS} slots, ${THREADS} threads, flash attention off, F16 KV, ${CONTEXT_PER_SLOT} tokens per slot; `
    + `${REQUESTS} streamed greedy requests of ${INPUT_TOKENS} prompt / ${OUTPUT_TOKENS} output tokens per round, closed loop, sides alternating, ${ROUNDS} rounds; load average ${loadavg().map((l) => l.toFixed(1)).join(" ")}`);
  let allMet = true;
  for (const clients of CONCURRENCY) {
    const rounds: Record<string, { tps: number; ttftP99: number; tpotP50: number }[]> = { ours: [], "llama-server": [] };
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, baseUrl] of round % 2 === 0 ? sides : [...sides].reverse()) {
        // A round with a failed request is measured again once, and said so (llama-server has dropped
        // a connection at 16 clients now and then); a second failure ends the benchmark.
        for (let attempt = 1; ; attempt++) {
          const result = await runLoadPoint({ url: `${baseUrl}/v1/completions`, body }, { mode: { kind: "closed", concurrency: clients }, requests: REQUESTS, warmup: 2, maxErrorRate: 0, seed: round });
          const measured = summarizeLoadPoint(name, result.samples, result.samples.map(requestMetrics), result.durationS, {});
          if (measured.completed === REQUESTS && measured.ttftMs !== undefined) {
            rounds[name].push({ tps: measured.outputTokensPerSecond, ttftP99: measured.ttftMs.p99, tpotP50: measured.tpotMs?.median ?? NaN });
            break;
          }
          const failure = `${name} at ${clients} clients: ${measured.completed}/${REQUESTS} requests completed (${JSON.stringify(measured.errors)})`;
          if (attempt === 2) throw new Error(failure);
          console.log(`  ${failure}; measuring the round again`);
        }
      }
    }
    const median = (name: string, key: "tps" | "ttftP99" | "tpotP50") => distribution(rounds[name].map((r) => r[key]))!.median;
    const tpsRatio = median("ours", "tps") / median("llama-server", "tps");
    const ttftRatio = median("ours", "ttftP99") / median("llama-server", "ttftP99");
    const met = tpsRatio >= TARGET_TPS_RATIO && ttftRatio <= TARGET_TTFT_P99_RATIO;
    allMet &&= met;
    const perRound = (name: string) => rounds[name].map((r) => `${r.tps.toFixed(0)} tok/s TTFT p99 ${r.ttftP99.toFixed(1)} ms`).join("; ");
    console.log(`${clients} client(s): ours ${median("ours", "tps").toFixed(0)} vs llama-server ${median("llama-server", "tps").toFixed(0)} output tok/s — ratio ${tpsRatio.toFixed(2)} (target ≥ ${TARGET_TPS_RATIO}); `
      + `TTFT p99 ${median("ours", "ttftP99").toFixed(1)} vs ${median("llama-server", "ttftP99").toFixed(1)} ms — ratio ${ttftRatio.toFixed(2)} (target ≤ ${TARGET_TTFT_P99_RATIO}); `
      + `TPOT p50 ${median("ours", "tpotP50").toFixed(2)} vs ${median("llama-server", "tpotP50").toFixed(2)} ms ${met ? "OK" : "BELOW TARGET"}\n  ours: ${perRound("ours")}\n  llama-server: ${perRound("llama-server")}`);
  }
  console.log(describeFloors(await decodeFloors(model.path, { threads: THREADS, sequences: SLOTS, contextSize: CONTEXT_PER_SLOT, batchSize: BATCH, tokens: OUTPUT_TOKENS })));
  console.log(`load average after: ${loadavg().map((l) => l.toFixed(1)).join(" ")}; ${allMet ? "all targets met" : "some target missed"}`);
} finally {
  await stopManagedServer(ours);
  await llama.stop();
}
