/**
 * npm run bench:beside — what one sampled client costs a greedy one: a greedy request's latency
 * alone and while a sampled request (temperature 0.8, top_p 0.95, seeded) streams beside it, on our
 * server and on llama-server side by side in one run, same fixture and settings. Issue 41's
 * target: beside a sampled request, a greedy one keeps its alone latency within 1.5× (it once took
 * 37× on the Gemma 3 vocabulary, when a sampled token blocked the step every slot waits on).
 *
 * Each side: ROUNDS greedy requests alone, then ROUNDS with one sampled request kept in flight
 * beside each (a new one starts whenever the last ends); medians. Both servers get 2 slots, 1
 * thread, F16 KV, flash attention off. BENCH_MODEL picks the fixture (default the Gemma 3
 * vocabulary one), BENCH_ROUNDS the requests per median (default 5), BENCH_TOKENS their length
 * (default 64). Exit 1 when ours misses the target, 2 with one line when something broke.
 */
import { loadavg } from "node:os";
import { resolveModel } from "../harness/fixtures/registry.js";
import { describeMachine, machineInfo } from "../harness/results/machine.js";
import { EXIT } from "../harness/results/exit-code.js";
import { distribution } from "../harness/stats/distribution.js";
import { httpCall } from "../harness/sut/http-call.js";
import { startManagedServer, stopManagedServer, type ManagedServer } from "../harness/sut/managed-server.js";
import { buildLlamaServer } from "../harness/sut/llama-server-binary.js";
import { startLlamaServerBeside } from "./llama-server-beside.js";

const MODEL = process.env.BENCH_MODEL ?? "gemma4-gemma3-vocab:F32";
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const TOKENS = Number(process.env.BENCH_TOKENS ?? 64);
const TARGET_RATIO = 1.5;
const SLOTS = 2;
const CONTEXT_PER_SLOT = 256;
const PROMPT = "The river runs past the old mill and the miller waves from the door";

async function complete(server: ManagedServer, body: Record<string, unknown>): Promise<void> {
  const response = await httpCall(`${server.baseUrl}/v1/completions`, { body: { model: "m", prompt: PROMPT, max_tokens: TOKENS, ignore_eos: true, ...body } });
  if (response.status !== 200) throw new Error(`${server.baseUrl}: HTTP ${response.status}: ${response.text.slice(0, 200)}`);
}

async function timedGreedy(server: ManagedServer): Promise<number> {
  const start = performance.now();
  await complete(server, { temperature: 0 });
  return performance.now() - start;
}

/** Median greedy latency alone, and beside one sampled request kept in flight. */
async function side(server: ManagedServer): Promise<{ aloneMs: number; besideMs: number }> {
  await timedGreedy(server);
  const alone: number[] = [];
  for (let i = 0; i < ROUNDS; i++) alone.push(await timedGreedy(server));
  let running = true;
  let seed = 0;
  const sampler = (async () => {
    while (running) await complete(server, { temperature: 0.8, top_p: 0.95, seed: seed++, stream: false });
  })();
  const beside: number[] = [];
  try {
    // Let the sampled request get going first: its first tokens are what the greedy one must share the step with.
    await new Promise((resolve) => setTimeout(resolve, 200));
    for (let i = 0; i < ROUNDS; i++) beside.push(await timedGreedy(server));
  } finally {
    running = false;
    await sampler;
  }
  return { aloneMs: distribution(alone)!.median, besideMs: distribution(beside)!.median };
}

try {
  const model = await resolveModel(MODEL);
  const llamaServer = buildLlamaServer();
  const settings = { slots: SLOTS, contextSize: CONTEXT_PER_SLOT, threads: 1 };
  const ours = await startManagedServer({ modelPath: model.path, ...settings, queue: 4, flashAttention: false, kvCacheType: "F16", bootTimeoutS: 300 });
  let theirs: ManagedServer | undefined;
  try {
    theirs = await startLlamaServerBeside(llamaServer, model.path, { slots: SLOTS, contextPerSlot: CONTEXT_PER_SLOT, threads: 1, bootTimeoutS: 300 });
    const results = { ours: await side(ours), "llama-server": await side(theirs) };
    console.log(`machine: ${describeMachine(machineInfo())}, load average after ${loadavg().map((l) => l.toFixed(1)).join(" ")}`);
    console.log(`${model.id}: a greedy request of ${TOKENS} tokens, median of ${ROUNDS}, alone and beside one sampled request (temperature 0.8, top_p 0.95; llama-server adds its default top_k 40 and min_p 0.05)`);
    for (const [name, r] of Object.entries(results)) {
      console.log(`  ${name}: alone ${r.aloneMs.toFixed(0)} ms, beside ${r.besideMs.toFixed(0)} ms — ×${(r.besideMs / r.aloneMs).toFixed(2)}`);
    }
    const ratio = results.ours.besideMs / results.ours.aloneMs;
    const met = ratio <= TARGET_RATIO;
    console.log(`${met ? "MET" : "MISSED"}: ours keeps a greedy request beside a sampled one at ×${ratio.toFixed(2)} its alone latency (target ≤ ×${TARGET_RATIO})`);
    process.exitCode = met ? EXIT.pass : EXIT.gateFailed;
  } finally {
    await stopManagedServer(ours);
    if (theirs !== undefined) await stopManagedServer(theirs);
  }
} catch (error) {
  console.error(`bench:beside: ${(error as Error).message}`);
  process.exitCode = EXIT.error;
}
