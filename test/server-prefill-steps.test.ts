/**
 * Our server prefills a long prompt one chunk a step, each step's llama_decode on a worker thread
 * (server/batch-step.ts stepBatch), over real HTTP on loopback with a real GGUF: while the long
 * prompt prefills, /metrics still answers, a short request sent meanwhile gets its first token
 * before the long one does, and /metrics counts a step per chunk, not one step for the whole prompt.
 */
import { test } from "uvu";
import * as assert from "uvu/assert";
import { resolveModel } from "../harness/fixtures/registry.js";
import { httpCall } from "../harness/sut/http-call.js";
import { startManagedServer, stopManagedServer, type ManagedServer } from "../harness/sut/managed-server.js";

/** Steps of a chunk run on a worker thread (server/batch-step.ts OFF_THREAD_TOKENS). */
const CHUNK = 256;
const LONG_TOKENS = 3072;

async function tokenize(server: ManagedServer, text: string): Promise<number[]> {
  const response = await httpCall(`${server.baseUrl}/tokenize`, { body: { content: text, add_special: true } });
  return (JSON.parse(response.text) as { tokens: number[] }).tokens;
}

async function metric(server: ManagedServer, name: string): Promise<number> {
  const text = (await httpCall(`${server.baseUrl}/metrics`)).text;
  const value = new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1];
  assert.ok(value !== undefined, `/metrics has no ${name}`);
  return Number(value);
}

/** A streamed greedy request: when its first token arrived (performance.now()) and its whole text. */
async function streamed(server: ManagedServer, prompt: readonly number[], maxTokens: number): Promise<{ firstAt: number; text: string }> {
  const response = await fetch(`${server.baseUrl}/v1/completions`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ prompt, max_tokens: maxTokens, temperature: 0, ignore_eos: true, stream: true, cache_prompt: false }),
  });
  assert.is(response.status, 200);
  let firstAt: number | undefined;
  let text = "";
  const decoder = new TextDecoder();
  for await (const chunk of response.body!) {
    for (const line of decoder.decode(chunk as Uint8Array, { stream: true }).split("\n")) {
      if (!line.startsWith("data: {")) continue;
      const piece = (JSON.parse(line.slice(6)) as { choices: { text: string }[] }).choices[0]?.text ?? "";
      if (piece !== "") firstAt ??= performance.now();
      text += piece;
    }
  }
  assert.ok(firstAt !== undefined, "no token arrived");
  return { firstAt, text };
}

test("a long prompt prefills one chunk a step: the event loop serves meanwhile, and a short request sent during it gets its first token first", async () => {
  const model = await resolveModel("tiny-random:F32");
  const server = await startManagedServer({ modelPath: model.path, slots: 2, queue: 2, contextSize: 4096, threads: 1, flashAttention: false, kvCacheType: "F32", batchSize: 512, prefillChunk: CHUNK, bootTimeoutS: 120 });
  try {
    const letter = "Dear friend, the harvest is late this year and the river is high; the mill wheel turns all night. ";
    const long = (await tokenize(server, letter.repeat(40))).slice(0, LONG_TOKENS);
    assert.is(long.length, LONG_TOKENS);
    const short = await tokenize(server, "Hello there.");
    const stepsBefore = await metric(server, "bench_step_seconds_count");
    const longAnswer = streamed(server, long, 4);
    // Once the long request holds a slot (its prefill has begun), /metrics must still answer: steps do not block the event loop.
    while (await metric(server, "bench_slots_active") < 1) await new Promise((resolve) => setTimeout(resolve, 2));
    const shortAnswer = await streamed(server, short, 2);
    const { firstAt: longFirstAt } = await longAnswer;
    assert.ok(shortAnswer.firstAt < longFirstAt, `the short request's first token came ${(shortAnswer.firstAt - longFirstAt).toFixed(1)} ms after the long one's: it waited for the whole prefill`);
    const steps = await metric(server, "bench_step_seconds_count") - stepsBefore;
    assert.ok(steps >= Math.ceil(LONG_TOKENS / CHUNK), `${steps} steps for a ${LONG_TOKENS}-token prompt in chunks of ${CHUNK}`);
  } finally {
    await stopManagedServer(server);
  }
});

test.run();
