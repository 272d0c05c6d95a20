import { test } from "uvu";
import * as assert from "uvu/assert";
import { getLlama, LlamaLogLevel, type Token } from "node-llama-cpp";
import { resolveModel } from "../harness/fixtures/registry.js";
import { reachNativeContext, releaseNativeContext, sequenceIdOf } from "../harness/sut/llamacpp-native-context.js";
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

test("the addon's teacher-forced top-k is node-llama-cpp's full distribution reduced: same ids in the same order, log-probs within float rounding, none of the sequence left behind", async () => {
  const { model, context } = await openContext();
  const native = reachNativeContext(context, shape);
  assert.ok(native.reached, native.reached ? "" : native.reason);
  if (!native.reached) return;
  const sequence = context.getSequence();
  const sequenceId = sequenceIdOf(sequence);
  const ids = [model.tokens.bos!, ...model.tokenize("the model runs fast, and then it stops")] as Token[];
  const firstScored = 5;
  const k = 20;
  const probe = { generateNext: { probabilities: true } } as const;
  const shipped = await sequence.controlledEvaluate(ids.map((id, position) => (position >= firstScored ? [id, probe] as [Token, typeof probe] : id)));
  await sequence.clearHistory();
  const rows = native.teacherForcedTopK(sequenceId, Int32Array.from(ids), firstScored, k);
  assert.is(rows.ids.length, (ids.length - firstScored) * k);
  let largest = 0;
  for (let position = firstScored; position < ids.length; position++) {
    const expected = [...shipped[position]!.next.probabilities!.entries()].sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, k);
    const row = (position - firstScored) * k;
    assert.equal(Array.from(rows.ids.subarray(row, row + k)), expected.map(([id]) => id), `position ${position}`);
    expected.forEach(([, p], r) => { largest = Math.max(largest, Math.abs(rows.logprobs[row + r] - Math.log(p))); });
  }
  // node-llama-cpp normalises in float; the addon in double over the same logits.
  assert.ok(largest < 1e-5, `largest log-prob difference ${largest}`);
  assert.ok(largest > 0 || rows.logprobs.some((lp) => lp < -1), "a row of near-certain tokens would not tell the two apart");
  native.clearSequence(sequenceId);
  assert.is(native.firstPosition(sequenceId), -1, "the caller's clear leaves the sequence empty");
  assert.throws(() => native.teacherForcedTopK(sequenceId, Int32Array.from(ids), ids.length, k), /firstScored must index a token/);
  assert.throws(() => native.teacherForcedTopK(sequenceId, Int32Array.from(ids), 0, 1_000_000), /k <= the vocabulary size/);
  sequence.dispose();
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
