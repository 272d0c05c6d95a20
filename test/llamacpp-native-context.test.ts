import { test } from "uvu";
import * as assert from "uvu/assert";
import { getLlama, LlamaLogLevel, type Token } from "node-llama-cpp";
import { resolveModel } from "../harness/fixtures/registry.js";
import { reachNativeContext, releaseNativeContext } from "../harness/sut/llamacpp-native-context.js";
import { orderSampling } from "../server/sampling-order.js";

const shape = { contextSize: 128, sequences: 2, batchSize: 256, threads: 2 };

async function openContext() {
  const llama = await getLlama({ gpu: false, build: "never", maxThreads: 2, logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: (await resolveModel("tiny-random:F32")).path, gpuLayers: 0 });
  const context = await model.createContext({ contextSize: shape.contextSize, sequences: shape.sequences, batchSize: shape.batchSize, threads: { ideal: shape.threads, min: shape.threads }, flashAttention: false });
  return { model, context };
}

async function greedyIds(context: Awaited<ReturnType<typeof openContext>>["context"], model: Awaited<ReturnType<typeof openContext>>["model"]): Promise<number[]> {
  const sequence = context.getSequence();
  const prompt = [model.tokens.bos!, ...model.tokenize("the model runs fast")] as Token[];
  const greedy = { generateNext: { token: true } } as const;
  let out = await sequence.controlledEvaluate([...prompt.slice(0, -1), [prompt[prompt.length - 1], greedy]]);
  const ids: number[] = [];
  for (let n = 0; n < 16; n++) {
    ids.push(out[out.length - 1]!.next.token!);
    out = await sequence.controlledEvaluate([[ids[ids.length - 1] as Token, greedy]]);
  }
  sequence.dispose();
  return ids;
}

test("the addon reaches node-llama-cpp's llama.cpp context and gives it a persistent pool; greedy tokens through the pool and the addon's argmax are node-llama-cpp's own", async () => {
  const { model, context } = await openContext();
  const shipped = await greedyIds(context, model);
  const native = reachNativeContext(context, shape);
  assert.ok(native.reached, native.reached ? "" : native.reason);
  assert.is(native.reached && native.threads, "persistent pool");
  const pooled = await greedyIds(context, model);
  assert.equal(pooled, shipped);
  orderSampling(context, native);
  const argmaxed = await greedyIds(context, model);
  assert.equal(argmaxed, shipped);
  assert.is(new Set(pooled).size > 1, true, "a degenerate sequence would not tell the two apart");
  await context.dispose();
  releaseNativeContext(native);
  await model.dispose();
});

test("a context that does not match what the caller says is refused before its pointer is used, with the reason", async () => {
  const { model, context } = await openContext();
  for (const wrong of [{ ...shape, sequences: 3 }, { ...shape, threads: 1 }, { ...shape, batchSize: 512 }, { ...shape, contextSize: 4096 }]) {
    const native = reachNativeContext(context, wrong);
    assert.is(native.reached, false, JSON.stringify(wrong));
    assert.match(native.reached ? "" : native.reason, /does not look as expected/);
  }
  const notAContext = reachNativeContext({ _ctx: {} } as unknown as typeof context, shape);
  assert.is(notAContext.reached, false);
  assert.match(notAContext.reached ? "" : notAContext.reason, /not a wrapped node-llama-cpp context/);
  await context.dispose();
  await model.dispose();
});

test.run();
