/**
 * npm run bench:server — aggregate generated tok/s of our continuous-batching server at 1 and 4
 * slots (16 greedy requests of 64 tokens, as many in flight as slots), against node-llama-cpp
 * driving the same sequences directly in one process (one sequence per in-flight request),
 * measured side by side in one run. Target: the server keeps at least 90%.
 */
import { performance } from "node:perf_hooks";
import { availableParallelism } from "node:os";
import { getLlama, LlamaLogLevel, type Token } from "node-llama-cpp";
import { resolveModel } from "../harness/fixtures/registry.js";
import { describeMachine, machineInfo } from "../harness/results/machine.js";
import { distribution } from "../harness/stats/distribution.js";
import { loadParitySuite } from "../harness/suites/load.js";
import { httpCall, startManagedServer, stopManagedServer } from "../harness/sut/http.js";
import { argmaxToken } from "../harness/sut/topk.js";

const MAX_TOKENS = 64;
const ROUNDS = 5;
const suite = loadParitySuite("parity16");
const model = await resolveModel("tiny-random:F32");
/** Both sides compute with the same numerics: llama.cpp's default KV type, as a production server runs. */
const NUMERICS = { threads: 1, kvCacheType: "F16", batchSize: 512, flashAttention: false, contextSize: 256 } as const;

/** Runs `jobs` with at most `width` in flight; returns generated tokens per second. */
async function throughput(width: number, jobs: number, one: (index: number) => Promise<number>): Promise<number> {
  let next = 0;
  let tokens = 0;
  const started = performance.now();
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < jobs) {
      // Not `tokens += await …`: that reads `tokens` before the await and drops the other workers' counts.
      const produced = await one(next++);
      tokens += produced;
    }
  }));
  return tokens / ((performance.now() - started) / 1000);
}

/** Our server at `slots`: one request's completion tokens, over HTTP. */
async function openServerSide(slots: number): Promise<{ one: (index: number) => Promise<number>; close: () => Promise<void> }> {
  const server = await startManagedServer({ modelPath: model.path, slots, queue: 16, ...NUMERICS, bootTimeoutS: 120 });
  return {
    one: async (i) => {
      const response = await httpCall(`${server.baseUrl}/v1/completions`, { body: { prompt: suite.prompts[i % suite.prompts.length], max_tokens: MAX_TOKENS, temperature: 0, ignore_eos: true } });
      return (JSON.parse(response.text) as { usage: { completion_tokens: number } }).usage.completion_tokens;
    },
    close: () => stopManagedServer(server),
  };
}

/** node-llama-cpp driving `slots` sequences of one context directly: one request's greedy tokens. */
async function openRawSide(slots: number): Promise<{ one: (index: number) => Promise<number>; close: () => Promise<void> }> {
  const llama = await getLlama({ gpu: false, build: "never", maxThreads: availableParallelism(), logLevel: LlamaLogLevel.error });
  const loaded = await llama.loadModel({ modelPath: model.path, gpuLayers: 0 });
  const context = await loaded.createContext({
    contextSize: NUMERICS.contextSize * slots, sequences: slots, batchSize: NUMERICS.batchSize, threads: { ideal: NUMERICS.threads, min: NUMERICS.threads },
    flashAttention: NUMERICS.flashAttention, experimentalKvCacheKeyType: NUMERICS.kvCacheType, experimentalKvCacheValueType: NUMERICS.kvCacheType,
  });
  const free = Array.from({ length: slots }, () => context.getSequence());
  const probe = { generateNext: { probabilities: true } } as const;
  return {
    one: async (i) => {
      const sequence = free.pop()!;
      await sequence.clearHistory();
      const prompt = [loaded.tokens.bos!, ...loaded.tokenize(suite.prompts[i % suite.prompts.length])] as Token[];
      let out = await sequence.controlledEvaluate([...prompt.slice(0, -1), [prompt[prompt.length - 1], probe]]);
      for (let n = 1; n < MAX_TOKENS; n++) out = await sequence.controlledEvaluate([[argmaxToken(out[out.length - 1]!.next.probabilities!) as Token, probe]]);
      free.push(sequence);
      return MAX_TOKENS;
    },
    close: async () => {
      await context.dispose();
      await loaded.dispose();
    },
  };
}


console.log(`machine: ${describeMachine(machineInfo())}; model ${model.id}; 16 requests × ${MAX_TOKENS} tokens per round, server and raw rounds alternating, median of ${ROUNDS}; both sides ${JSON.stringify(NUMERICS)}`);
for (const slots of [1, 4]) {
  const server = await openServerSide(slots);
  const raw = await openRawSide(slots);
  await throughput(slots, slots, server.one);
  await throughput(slots, slots, raw.one);
  const serverRounds: number[] = [];
  const rawRounds: number[] = [];
  // Alternating rounds: a noisy stretch of the machine hits both sides, not one.
  for (let r = 0; r < ROUNDS; r++) {
    serverRounds.push(await throughput(slots, 16, server.one));
    rawRounds.push(await throughput(slots, 16, raw.one));
  }
  await server.close();
  await raw.close();
  const serverTps = distribution(serverRounds)!.median;
  const rawTps = distribution(rawRounds)!.median;
  const ratio = serverTps / rawTps;
  console.log(`${slots} slot(s): server ${serverTps.toFixed(0)} tok/s, raw node-llama-cpp ${rawTps.toFixed(0)} tok/s — server/raw = ${ratio.toFixed(3)} (target ≥ 0.90) ${ratio >= 0.9 ? "OK" : "BELOW TARGET"}; per-round ratios ${serverRounds.map((s, i) => (s / rawRounds[i]).toFixed(2)).join(" ")}`);
}
