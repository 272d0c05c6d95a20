/**
 * Minimal reproduction: node-llama-cpp 3.21.1 gives wrong next-token distributions when several
 * sequences' prefills share one batch — and why. Usage (after `npx tsc`):
 *
 *   node dist/scripts/batched-prefill-race.js [rounds=40] [concurrent|settled|chained|all]
 *
 * Each round prefills the 16 parity16 prompts into 16 sequences of one context at once (one
 * `controlledEvaluate` each, awaited together, so node-llama-cpp packs them into one llama_decode)
 * and compares every prompt's next-token argmax and its probability with the same prompt prefilled
 * alone. Three arms:
 *  - concurrent: node-llama-cpp as shipped. Its sampleToken runs one AsyncWorker per sequence on
 *    libuv's thread pool, so several threads call llama_get_logits_ith at once. A context with
 *    n_seq_max > 1 and no unified KV cache splits batches with split_equal, which can reorder the
 *    outputs; llama.cpp then records `output_swaps` and applies them lazily, on the first logits
 *    access (llama_context::output_reorder), mutating the logits buffer. Two threads doing that at
 *    once swap rows twice or half-way: a sequence reads another's logits.
 *  - settled: what our server does (server/sampling-order.ts): each sampling first makes the
 *    reorder happen on the JavaScript thread (native/llama-context), then the samplings run at once.
 *  - chained: the server's fallback without the addon, sampleToken calls one after another, as
 *    llama-server samples on its one thread.
 */
import { availableParallelism } from "node:os";
import { getLlama, LlamaLogLevel, type Token } from "node-llama-cpp";
import { resolveModel } from "../harness/fixtures/registry.js";
import { loadParitySuite } from "../harness/suites/load.js";
import { argmaxToken } from "../harness/sut/topk.js";
import { reachNativeContext, releaseNativeContext, type NativeContext } from "../harness/sut/llamacpp-native-context.js";
import { orderSampling } from "../server/sampling-order.js";

const rounds = Number(process.argv[2] ?? 40);
const arms = process.argv[3] === undefined || process.argv[3] === "all" ? ["concurrent", "settled", "chained"] : [process.argv[3]];
const prompts = loadParitySuite("parity16").prompts;
const modelFile = await resolveModel("tiny-random:F32");
const llama = await getLlama({ gpu: false, build: "never", maxThreads: availableParallelism(), logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: modelFile.path, gpuLayers: 0 });
const probe = { generateNext: { probabilities: true } } as const;
const ids = prompts.map((p) => [model.tokens.bos!, ...model.tokenize(p)] as Token[]);

for (const arm of arms) {
  const context = await model.createContext({
    contextSize: 256, sequences: prompts.length, batchSize: 512, threads: { ideal: 1, min: 1 },
    flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
  });
  const native: NativeContext = arm === "chained" ? { reached: false, reason: "the chained arm" } : reachNativeContext(context, { contextSize: 256, sequences: prompts.length, batchSize: 512, threads: 1 });
  if (arm === "settled" && !native.reached) throw new Error(`the settled arm needs the llama-context addon: ${native.reason}`);
  if (arm !== "concurrent") orderSampling(context, native);
  const sequences = prompts.map(() => context.getSequence());
  const next = async (sequence: (typeof sequences)[number], prompt: Token[]) => {
    await sequence.clearHistory();
    const out = await sequence.controlledEvaluate([...prompt.slice(0, -1), [prompt[prompt.length - 1], probe]]);
    const probabilities = out[out.length - 1]!.next.probabilities!;
    const id = argmaxToken(probabilities);
    return { id, p: probabilities.get(id as Token)! };
  };
  // The reference: each prompt alone, one at a time.
  const alone: { id: number; p: number }[] = [];
  for (const [i, prompt] of ids.entries()) alone.push(await next(sequences[i], prompt));
  let wrongRounds = 0;
  let wrongPrompts = 0;
  for (let round = 0; round < rounds; round++) {
    await Promise.all(sequences.map((s) => s.clearHistory()));
    const batched = await Promise.all(ids.map((prompt, i) => sequences[i].controlledEvaluate([...prompt.slice(0, -1), [prompt[prompt.length - 1], probe]])));
    const wrong = batched.filter((out, i) => {
      const probabilities = out[out.length - 1]!.next.probabilities!;
      return argmaxToken(probabilities) !== alone[i].id || Math.abs(probabilities.get(alone[i].id as Token)! - alone[i].p) > 1e-4;
    }).length;
    if (wrong > 0) wrongRounds++;
    wrongPrompts += wrong;
  }
  console.log(`${arm}: ${rounds} rounds of ${prompts.length} prefills in one batch — ${wrongRounds} rounds with a wrong prompt, ${wrongPrompts}/${rounds * prompts.length} prompts wrong (vs each prompt alone)`);
  await context.dispose();
  releaseNativeContext(native);
}
await model.dispose();
