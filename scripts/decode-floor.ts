/**
 * npm run bench:floor — what node-llama-cpp alone costs per decoded token: one sequence's greedy
 * decode through `controlledEvaluate` with llama.cpp's own argmax (what our server's engine calls
 * per token), no HTTP, no engine. Two sides in one run, alternating: with our persistent ggml
 * thread pool attached (native/llama-context, as our server and the embedded SUT run) and as
 * node-llama-cpp ships (ggml creates and joins its threads for every graph).
 *
 *   node dist/scripts/decode-floor.js [--threads 2] [--keep-cores-busy]
 *
 * --keep-cores-busy runs one lowest-priority spinning process per core alongside: cores then never
 * go idle, so a thread created per graph starts at once — the control for the cause
 * (docs/findings.md: an idle vCPU takes milliseconds to wake).
 */
import { spawn } from "node:child_process";
import { availableParallelism, loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { getLlama, LlamaLogLevel, type Token } from "node-llama-cpp";
import { resolveModel } from "../harness/fixtures/registry.js";
import { describeMachine, machineInfo } from "../harness/results/machine.js";
import { distribution } from "../harness/stats/distribution.js";
import { reachNativeContext, releaseNativeContext, type ContextShape } from "../harness/sut/llamacpp-native-context.js";

const RUNS = 5;

/** Milliseconds per token, median of RUNS runs of `tokens` tokens, with or without our pool. */
async function floorMs(modelPath: string, shape: ContextShape, tokens: number, withPool: boolean): Promise<number> {
  const llama = await getLlama({ gpu: false, build: "never", maxThreads: availableParallelism(), logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
  const context = await model.createContext({ contextSize: shape.contextSize, sequences: shape.sequences, batchSize: shape.batchSize, threads: { ideal: shape.threads, min: shape.threads }, flashAttention: false });
  const native = withPool ? reachNativeContext(context, shape) : undefined;
  if (native?.reached === false) throw new Error(`the persistent thread pool could not be attached: ${native.reason}`);
  const sequence = context.getSequence();
  const greedy = { generateNext: { token: true } } as const;
  const runs: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    await sequence.clearHistory();
    const prompt = [model.tokens.bos!, ...model.tokenize("the model runs fast on new silicon")] as Token[];
    let out = await sequence.controlledEvaluate([...prompt.slice(0, -1), [prompt[prompt.length - 1], greedy]]);
    const started = performance.now();
    for (let n = 0; n < tokens; n++) out = await sequence.controlledEvaluate([[out[out.length - 1]!.next.token!, greedy]]);
    runs.push((performance.now() - started) / tokens);
  }
  await context.dispose();
  if (native !== undefined) releaseNativeContext(native);
  await model.dispose();
  return distribution(runs)!.median;
}

export interface DecodeFloors {
  readonly threads: number;
  readonly pooledMs: number;
  readonly shippedMs: number;
}

/** Both sides, pooled first then shipped, twice, keeping each side's better median (a warm-up round). */
export async function decodeFloors(modelPath: string, options: ContextShape & { tokens: number }): Promise<DecodeFloors> {
  const pooled: number[] = [];
  const shipped: number[] = [];
  for (let round = 0; round < 2; round++) {
    pooled.push(await floorMs(modelPath, options, options.tokens, true));
    shipped.push(await floorMs(modelPath, options, options.tokens, false));
  }
  return { threads: options.threads, pooledMs: Math.min(...pooled), shippedMs: Math.min(...shipped) };
}

export function describeFloors(floors: DecodeFloors): string {
  const head = `node-llama-cpp alone (controlledEvaluate, greedy in llama.cpp, one sequence, no server, ${floors.threads} thread(s)): `;
  // One thread computes on the calling thread either way: there is no pool to compare, only two measurements of the same path.
  if (floors.threads === 1) return `${head}${Math.min(floors.pooledMs, floors.shippedMs).toFixed(2)} ms per decoded token (the floor under our TPOT; one thread: no thread pool either way)`;
  return head
    + `${floors.pooledMs.toFixed(2)} ms per decoded token with our persistent thread pool (the floor under our TPOT); `
    + `${floors.shippedMs.toFixed(2)} ms as node-llama-cpp ships (threads created per graph), ×${(floors.shippedMs / floors.pooledMs).toFixed(1)}`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const threadsAt = args.indexOf("--threads");
  const threads = threadsAt >= 0 ? Number(args[threadsAt + 1]) : 2;
  if (!Number.isInteger(threads) || threads < 1) {
    console.error("bench:floor: --threads takes a whole number ≥ 1");
    process.exit(2);
  }
  const spinners = args.includes("--keep-cores-busy")
    ? Array.from({ length: availableParallelism() }, () => spawn("nice", ["-n", "19", process.execPath, "-e", "for (;;) {}"], { stdio: "ignore" }))
    : [];
  try {
    const model = await resolveModel("tiny-random:F32");
    console.log(`machine: ${describeMachine(machineInfo())}; model ${model.id}; load average ${loadavg().map((l) => l.toFixed(1)).join(" ")}${spinners.length > 0 ? `; ${spinners.length} lowest-priority spinners keep every core busy` : ""}`);
    console.log(describeFloors(await decodeFloors(model.path, { threads, sequences: 1, contextSize: 256, batchSize: 512, tokens: 64 })));
  } finally {
    for (const spinner of spinners) spinner.kill("SIGKILL");
  }
}
