/**
 * node dist/scripts/needle-ttft.js — time to first token of the needle suite's long prompts
 * (suites/niah.json: L = 4,000 on copy-4k) through our server and through llama.cpp's own
 * llama-server, each started as the suite's arms start them (same threads, context, F32 KV, flash
 * attention off, one slot), rounds alternating so a busy stretch of a shared machine hits both.
 * Each request is the needle case's prompt as token ids, streamed, greedy, max_tokens as the suite,
 * `cache_prompt: false` so that every request prefills its whole prompt. Prints each side's TTFT
 * and the CPU seconds its server process used per case in every round, the medians, the ratio
 * ours / llama-server (target ≤ 1.1), each server's boot time, and one verdict line (exit 0 met,
 * 1 missed, 2 broken).
 *
 * BENCH_ROUNDS=N measured rounds (default 3, after one warm-up round).
 */
import { loadavg } from "node:os";
import { resolveModel } from "../harness/fixtures/registry.js";
import { cpuSeconds } from "../harness/io/procfs.js";
import { summarizeLoadPoint } from "../harness/load/aggregate.js";
import { requestMetrics } from "../harness/load/request-metrics.js";
import { runLoadPoint } from "../harness/load/run-load.js";
import { describeMachine, machineInfo } from "../harness/results/machine.js";
import { EXIT } from "../harness/results/exit-code.js";
import { armSettings, fillPlaceholders } from "../harness/runner/open-sut.js";
import { loadSuite } from "../harness/suites/load.js";
import { resolveNiahSuite, type NiahSuite } from "../harness/suites/niah-suite.js";
import { startManagedServer, stopManagedServer, type ManagedServer } from "../harness/sut/managed-server.js";
import { startServerCommand } from "../harness/sut/server-command.js";
import { distribution } from "../harness/stats/distribution.js";
import { needlePrompts } from "./needle-prompts.js";
import { describeSpread } from "./quiet-rounds.js";

const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const TARGET_TTFT_RATIO = 1.1;
const OURS = "server copy-4k";
const THEIRS = "llama-server copy-4k";
const SIDES = ["ours", "llama-server"] as const;
type Side = (typeof SIDES)[number];

const suite = loadSuite("niah") as NiahSuite;
const spec = resolveNiahSuite(suite);
const arm = (label: string) => {
  const found = suite.arms.find((a) => a.label === label);
  if (found === undefined) throw new Error(`suites/niah.json has no arm "${label}"`);
  return found;
};

async function measure(servers: Record<Side, ManagedServer>, prompts: readonly number[][]): Promise<string> {
  const body = (index: number) => ({ model: "m", prompt: prompts[index % prompts.length], max_tokens: spec.maxTokens, temperature: 0, stream: true, cache_prompt: false });
  const rounds: Record<Side, { ttftMs: number; cpuS: number }[]> = { ours: [], "llama-server": [] };
  for (let round = 0; round <= ROUNDS; round++) {
    for (const side of round % 2 === 0 ? SIDES : [...SIDES].reverse()) {
      const pid = servers[side].child.pid!;
      const cpuBefore = cpuSeconds(pid);
      const result = await runLoadPoint({ url: `${servers[side].baseUrl}/v1/completions`, body, stallTimeoutMs: 300_000 }, { mode: { kind: "closed", concurrency: 1 }, requests: prompts.length, warmup: 0, maxErrorRate: 0, seed: round });
      const cpuS = (cpuSeconds(pid) - cpuBefore) / prompts.length;
      const summary = summarizeLoadPoint(side, result.samples, result.samples.map(requestMetrics), result.durationS, {});
      if (summary.completed !== prompts.length || summary.ttftMs === undefined) throw new Error(`${side}: ${summary.completed}/${prompts.length} requests completed (${JSON.stringify(summary.errors)})`);
      // Round 0 warms both (first graphs, page cache): not counted.
      if (round > 0) rounds[side].push({ ttftMs: summary.ttftMs.median, cpuS });
      console.log(`  ${round === 0 ? "warm-up" : `round ${round}`} ${side}: TTFT median ${summary.ttftMs.median.toFixed(0)} ms (cases ${result.samples.map(requestMetrics).map((m) => m!.ttftMs.toFixed(0)).join(", ")}), server CPU ${cpuS.toFixed(2)} s per case; load average ${loadavg()[0].toFixed(1)}`);
    }
  }
  const median = (side: Side, key: "ttftMs" | "cpuS") => distribution(rounds[side].map((r) => r[key]))!.median;
  const ratio = median("ours", "ttftMs") / median("llama-server", "ttftMs");
  for (const side of SIDES) console.log(`${side}: TTFT ms ${describeSpread(rounds[side].map((r) => r.ttftMs))}; server CPU s per case ${describeSpread(rounds[side].map((r) => r.cpuS), 2)}`);
  console.log(`TTFT ours / llama-server ${ratio.toFixed(2)} (target ≤ ${TARGET_TTFT_RATIO}); server CPU per case ours / llama-server ${(median("ours", "cpuS") / median("llama-server", "cpuS")).toFixed(2)}`);
  return ratio <= TARGET_TTFT_RATIO ? "PASS" : "FAIL";
}

const servers: Partial<Record<Side, ManagedServer>> = {};
let verdict: { line: string; code: number };
try {
  const oursArm = arm(OURS);
  const theirsArm = arm(THEIRS);
  const settings = armSettings(oursArm, {}, 1);
  const theirSettings = armSettings(theirsArm, {}, 1);
  const model = await resolveModel(oursArm.model);
  if (theirsArm.model !== oursArm.model) throw new Error(`arms "${OURS}" and "${THEIRS}" serve different models`);
  const prompts = await needlePrompts(spec, oursArm.model, settings);
  console.log(`machine: ${describeMachine(machineInfo())}; model ${model.id}; ${prompts.length} needle prompts of ${prompts.map((p) => p.length).join(", ")} tokens, max_tokens ${spec.maxTokens}; `
    + `ours: threads ${settings.threads}, context ${settings.contextSize}, KV ${settings.kvCacheType}, batch ${settings.batchSize}, flash attention ${settings.flashAttention ? "on" : "off"}; `
    + `llama-server: the suite's arm "${THEIRS}"; ${ROUNDS} rounds after a warm-up, sides alternating; load average ${loadavg().map((l) => l.toFixed(1)).join(" ")}`);
  // Boot to /health 200, which bench:niah's per-case time for a server arm includes (a third each).
  let bootStarted = performance.now();
  servers.ours = await startManagedServer({
    modelPath: model.path, slots: settings.sequences, queue: settings.sequences, contextSize: settings.contextSize, threads: settings.threads,
    flashAttention: settings.flashAttention, kvCacheType: settings.kvCacheType, batchSize: settings.batchSize, bootTimeoutS: 120,
  });
  const oursBootS = (performance.now() - bootStarted) / 1000;
  bootStarted = performance.now();
  const llamaServer = await startServerCommand((theirsArm.command ?? []).map((part) => fillPlaceholders(part, model.path, theirSettings)), { label: THEIRS, bootTimeoutS: 120 });
  servers["llama-server"] = llamaServer;
  console.log(`boot to /health 200: ours ${oursBootS.toFixed(2)} s, llama-server ${((performance.now() - bootStarted) / 1000).toFixed(2)} s (${llamaServer.argv.slice(1).join(" ")})`);
  const met = await measure(servers as Record<Side, ManagedServer>, prompts);
  verdict = { line: `needle-ttft verdict: ${met}`, code: met === "PASS" ? EXIT.pass : EXIT.gateFailed };
} catch (error) {
  verdict = { line: `needle-ttft verdict: ERROR — ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`, code: EXIT.error };
}
for (const [side, server] of Object.entries(servers)) {
  await stopManagedServer(server).catch((error: Error) => console.log(`note: stopping ${side}: ${error.message}`));
}
console.log(verdict.line);
process.exit(verdict.code);
