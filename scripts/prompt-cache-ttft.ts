/**
 * node dist/scripts/prompt-cache-ttft.js — what our server's prompt cache buys: time to first
 * token of streamed greedy requests that share a long prefix (a system prompt, a document), on
 * two servers started alike but for `--no-prompt-cache`, rounds alternating so a busy stretch of
 * a shared machine hits both. Prints TTFT p50/p99 per side and round, the median ratio, and the
 * prompt tokens each side evaluated and reported cached (/metrics).
 *
 * BENCH_MODELS=a,b picks fixtures (default tiny-random:F32,qwen35-tiny:F32); BENCH_REQUESTS,
 * BENCH_ROUNDS and BENCH_THREADS override the request count per round, rounds and threads.
 */
import { loadavg } from "node:os";
import { resolveModel } from "../harness/fixtures/registry.js";
import { describeMachine, machineInfo } from "../harness/results/machine.js";
import { distribution } from "../harness/stats/distribution.js";
import { summarizeLoadPoint } from "../harness/load/aggregate.js";
import { sharedPrefixPrompts } from "../harness/load/prompts.js";
import { requestMetrics } from "../harness/load/request-metrics.js";
import { runLoadPoint } from "../harness/load/run-load.js";
import { httpCall } from "../harness/sut/http-call.js";
import { startManagedServer, stopManagedServer, type ManagedServer } from "../harness/sut/managed-server.js";

const MODELS = (process.env.BENCH_MODELS ?? "tiny-random:F32,qwen35-tiny:F32").split(",");
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 16);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const THREADS = Number(process.env.BENCH_THREADS ?? 1);
const SLOTS = 4;
const CONTEXT_PER_SLOT = 1024;
const OUTPUT_TOKENS = 8;
/** About 550 tokens on the fixtures' character-level vocabulary. */
const PREFIX = "You are a careful assistant for a railway timetable office. Answer in one short sentence, name the station and the platform, "
  + "and never guess: if a train is not listed, say so. Trains: the 07:10 to Northgate from platform 2, the 07:45 to Harbour Road from platform 5, "
  + "the 08:05 to Millbrook from platform 1, the 08:30 to Northgate from platform 3, the 09:15 to Eastfield from platform 4, "
  + "the 10:00 to Harbour Road from platform 2, the 11:20 to Millbrook from platform 6, and the last one, the 12:40 to Eastfield from platform 1.";

async function promptCounters(server: ManagedServer): Promise<string> {
  const text = (await httpCall(`${server.baseUrl}/metrics`)).text;
  const read = (name: string) => /^(\S+) (\S+)$/m.exec(text.split("\n").find((line) => line.startsWith(`${name} `)) ?? "")?.[2] ?? "?";
  return `prompt tokens ${read("bench_prompt_tokens_total")}, evaluated ${read("bench_prompt_tokens_evaluated_total")}, reported cached ${read("bench_prompt_tokens_cached_total")}`;
}

console.log(`machine: ${describeMachine(machineInfo())}; ${SLOTS} slots, ${THREADS} thread(s), flash attention off, F16 KV, batch 512; `
  + `${REQUESTS} streamed greedy requests per round (one shared prefix + a distinct tail, ${OUTPUT_TOKENS} output tokens), one client, sides alternating, ${ROUNDS} rounds; `
  + `load average ${loadavg().map((l) => l.toFixed(1)).join(" ")}`);
for (const id of MODELS) {
  const model = await resolveModel(id);
  const options = { modelPath: model.path, slots: SLOTS, queue: 16, contextSize: CONTEXT_PER_SLOT, threads: THREADS, flashAttention: false, bootTimeoutS: 120 };
  const sides: [string, ManagedServer][] = [["cache on", await startManagedServer(options)], ["cache off", await startManagedServer({ ...options, promptCache: false })]];
  try {
    const prompts = sharedPrefixPrompts(REQUESTS + 2, PREFIX, OUTPUT_TOKENS);
    const body = (index: number) => ({ model: "m", prompt: prompts[index % prompts.length].prompt, max_tokens: OUTPUT_TOKENS, temperature: 0, ignore_eos: true, stream: true });
    const rounds: Record<string, { p50: number; p99: number }[]> = { "cache on": [], "cache off": [] };
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, server] of round % 2 === 0 ? sides : [...sides].reverse()) {
        const result = await runLoadPoint({ url: `${server.baseUrl}/v1/completions`, body }, { mode: { kind: "closed", concurrency: 1 }, requests: REQUESTS, warmup: 2, maxErrorRate: 0, seed: round });
        const measured = summarizeLoadPoint(name, result.samples, result.samples.map(requestMetrics), result.durationS, {});
        if (measured.completed !== REQUESTS || measured.ttftMs === undefined) throw new Error(`${id} ${name}: ${measured.completed}/${REQUESTS} requests completed (${JSON.stringify(measured.errors)})`);
        rounds[name].push({ p50: measured.ttftMs.median, p99: measured.ttftMs.p99 });
      }
    }
    const median = (name: string, key: "p50" | "p99") => distribution(rounds[name].map((r) => r[key]))!.median;
    console.log(`${id}: TTFT p50 ${median("cache on", "p50").toFixed(1)} ms with the cache vs ${median("cache off", "p50").toFixed(1)} ms without (ratio ${(median("cache on", "p50") / median("cache off", "p50")).toFixed(2)}); `
      + `p99 ${median("cache on", "p99").toFixed(1)} vs ${median("cache off", "p99").toFixed(1)} ms`);
    for (const [name, server] of sides) console.log(`  ${name}: ${rounds[name].map((r) => `p50 ${r.p50.toFixed(1)} / p99 ${r.p99.toFixed(1)} ms`).join("; ")}; ${await promptCounters(server)}`);
  } finally {
    for (const [, server] of sides) await stopManagedServer(server);
  }
}
console.log(`load average after: ${loadavg().map((l) => l.toFixed(1)).join(" ")}`);
