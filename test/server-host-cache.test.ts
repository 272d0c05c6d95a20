/**
 * Our server's host-memory prompt cache (`--cache-ram`, docs/server-cache.md) and slot choice by
 * reusable tokens, on every family's F32 fixture over loopback: more conversations than slots each
 * continue from the state they left, answering as a cold server does; a prompt that diverges from a
 * conversation does not cost that conversation its state; the same prompt gives the same
 * log-probs with the cache on, off and bypassed; FAKE host-restore-other is caught.
 */
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { stopManagedServer, type ManagedServer } from "../harness/sut/managed-server.js";
import { complete, idRun, MAX_TOKENS, metricsReader, serve, type Answer } from "./helpers/cache-server.js";

const CHUNK = 8;
const HOST_CACHE_MIB = 64;
/** More conversations than the servers' 2 slots. */
const CONVERSATIONS = 6;

/**
 * How far a hit's log-probs may sit from a cold slot's: a hit continues from a state whose last
 * prompt tokens were evaluated in other batches than a cold prefill cuts, and llama.cpp's results
 * depend on the batch (measured here: gemma4's tiny fixture ~2e-3, the other families < 1e-5).
 */
const HIT_LOGPROB_NOISE = 1e-2;
/** The cache on (a miss), off and bypassed cut a prompt into the same batches: the same numbers (measured: exactly equal). */
const SAME_PATH_TOLERANCE = 1e-6;

const FAMILIES = ["tiny-random:F32", "qwen35-tiny:F32", "qwen35moe-tiny:F32", "gemma4-tiny:F32", "nemotron-h-moe-tiny:F32"];

const largestGap = (a: Answer, b: Answer): number => Math.max(...a.logprobs!.map((p, i) => Math.abs(p - b.logprobs![i])));

/** Conversation i's first prompt: its own first token, so no two share a prefix. */
const firstPrompt = (i: number): number[] => idRun(24, 30 + 7 * i, 1 + (i % 5));

/** Every conversation's first turn, then every conversation's second: the answers of the second round. */
async function revisitAll(server: ManagedServer): Promise<{ next: number[]; expectedCached: number; hit: Answer }[]> {
  const first: Answer[] = [];
  for (let i = 0; i < CONVERSATIONS; i++) first.push(await complete(server, firstPrompt(i)));
  const revisits = [];
  for (let i = 0; i < CONVERSATIONS; i++) {
    const next = [...firstPrompt(i), ...first[i].ids, ...idRun(6, 11 + i, 3)];
    // The slot held the prompt and every generated token but the last (sampled, never evaluated).
    revisits.push({ next, expectedCached: firstPrompt(i).length + MAX_TOKENS - 1, hit: await complete(server, next, { logprobs: true }) });
  }
  return revisits;
}

for (const model of FAMILIES) {
  const familyTest = suite(model);
  let cached: ManagedServer;
  let cold: ManagedServer;

  familyTest.before(async () => {
    [cached, cold] = await Promise.all([
      serve(model, { prefillChunk: CHUNK, hostCacheMiB: HOST_CACHE_MIB }),
      serve(model, { prefillChunk: CHUNK, promptCache: false }),
    ]);
  });
  familyTest.after(async () => {
    await stopManagedServer(cached);
    await stopManagedServer(cold);
  });

  familyTest(`${model}: ${CONVERSATIONS} conversations on 2 slots each continue from the host cache and answer as a cold server`, async () => {
    for (const { next, expectedCached, hit } of await revisitAll(cached)) {
      assert.is(hit.cached, expectedCached);
      const reference = await complete(cold, next, { logprobs: true });
      assert.equal(hit.ids, reference.ids);
      assert.ok(largestGap(hit, reference) <= HIT_LOGPROB_NOISE, `log-probs ${largestGap(hit, reference)} apart`);
    }
    const read = await metricsReader(cached);
    assert.ok(read("bench_prompt_cache_host_hits_total") >= CONVERSATIONS - 2, `host hits ${read("bench_prompt_cache_host_hits_total")}`);
    assert.ok(read("bench_prompt_cache_host_entries") >= 1);
    assert.ok(read("bench_prompt_cache_host_bytes") > 0 && read("bench_prompt_cache_host_bytes") <= HOST_CACHE_MIB * 2 ** 20);
  });

  familyTest(`${model}: a prompt diverging from a conversation does not cost it its state: the conversation's next turn reuses all of it`, async () => {
    const conversation = idRun(40, 21, 2);
    const answer = await complete(cached, conversation);
    await complete(cached, [...conversation.slice(0, 20), ...idRun(20, 5, 7)]);
    const next = await complete(cached, [...conversation, ...answer.ids, ...idRun(5, 9, 1)]);
    assert.is(next.cached, conversation.length + MAX_TOKENS - 1);
  });

  familyTest(`${model}: the same prompt gives the same log-probs with the cache on, off and bypassed per request`, async () => {
    const prompt = idRun(50, 3, 5);
    const miss = await complete(cached, prompt, { logprobs: true });
    assert.is(miss.cached, 0, "a prompt no slot or entry shares");
    for (const other of [await complete(cached, prompt, { logprobs: true, cachePrompt: false }), await complete(cold, prompt, { logprobs: true })]) {
      assert.equal(other.ids, miss.ids);
      assert.ok(largestGap(miss, other) <= SAME_PATH_TOLERANCE, `log-probs ${largestGap(miss, other)} apart`);
    }
  });

  familyTest.run();
}

const faultTest = suite("FAKE host-restore-other");
for (const model of ["tiny-random:F32", "qwen35-tiny:F32"]) {
  faultTest(`${model}: a host hit restoring another entry's state is caught against the cold server`, async () => {
    const [faulty, cold] = await Promise.all([
      serve(model, { prefillChunk: CHUNK, hostCacheMiB: HOST_CACHE_MIB }, "host-restore-other"),
      serve(model, { prefillChunk: CHUNK, promptCache: false }),
    ]);
    try {
      let caught = 0;
      for (const { next, hit } of await revisitAll(faulty)) {
        const reference = await complete(cold, next, { logprobs: true });
        if (largestGap(hit, reference) > HIT_LOGPROB_NOISE) caught++;
      }
      assert.ok(caught > 0, "every revisit answered as the cold server");
    } finally {
      await stopManagedServer(faulty);
      await stopManagedServer(cold);
    }
  });
}
faultTest.run();
