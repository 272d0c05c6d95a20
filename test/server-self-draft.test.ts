/**
 * A draft model identical to its target keeps every draft, with 4 clients on 4 slots, on every
 * family (docs/speculative.md, "A self-draft"): two-turn conversations sharing a prefix, more of
 * them than slots (prompt-cache hits, host-cache restores and checkpoint cut-backs beside
 * speculating slots), a full garbage collection between the turns, the whole workload twice.
 * Every answer equals the same server's without a draft model, and the two passes draft and keep
 * the same counts (gemma4 up to its batch-shape noise: harness/load/self-draft.ts).
 *
 * The collection is what the concurrency used to hide: node-llama-cpp clears a context sequence
 * whose JavaScript object is collected (its FinalizationRegistry), and the server held only the
 * draft sequences' ids, so at some collection every draft sequence went empty under the
 * speculator, which went on drafting from nothing (measured: a pass of 319 drafts kept 265). When
 * that came depended on the collector: a collection soon after boot, before anything was drafted,
 * did no harm. So the test also watches node-llama-cpp hand sequences back to its pool: none may
 * go while a server runs, whenever the collector finds it. The servers run in this process,
 * where the test can collect and watch; over real HTTP on loopback as always.
 */
import v8 from "node:v8";
import vm from "node:vm";
import { setTimeout as sleep } from "node:timers/promises";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { LlamaContext } from "node-llama-cpp";
import { resolveModel } from "../harness/fixtures/registry.js";
import { httpCall } from "../harness/sut/http-call.js";
import { judgeSelfDraft, rejectedAt, SELF_DRAFT_FAMILIES, selfDraftPass, type SelfDraftShape } from "../harness/load/self-draft.js";
import { startServer, type RunningServer } from "../server/start.js";

const SHAPE: SelfDraftShape = { conversations: 8, sharedPrefix: 40, ownTokens: 10, maxTokens: 32, draftMax: 3 };
const SLOTS = 4;
const CLIENTS = 4;

/**
 * The sequence ids node-llama-cpp takes back into its pool from a context still open, in this
 * process: its FinalizationRegistry calls `_reclaimUnusedSequenceId` (internal; the version is
 * pinned exactly) when a sequence object is collected, and that clears the sequence in llama.cpp
 * (a disposed context's it ignores). Watched, not changed: the original runs. Each context binds
 * the method when it is made, so this is in place before any server starts.
 */
const reclaimed: number[] = [];
type ContextInternals = { _disposed: boolean; _reclaimUnusedSequenceId(sequenceId: number): unknown };
const contextInternals = LlamaContext.prototype as unknown as ContextInternals;
const reclaim = contextInternals._reclaimUnusedSequenceId;
contextInternals._reclaimUnusedSequenceId = function watched(this: ContextInternals, sequenceId: number) {
  if (!this._disposed) reclaimed.push(sequenceId);
  return reclaim.call(this, sequenceId);
};

/**
 * A full collection, and the finalizers it queued run. `gc` without --expose-gc: V8's flag set now
 * and the function taken from a fresh context (the test runner starts node without flags). A
 * canary of our own says the collection really finalized something; without it the test could
 * pass having collected nothing.
 */
async function collectGarbage(): Promise<void> {
  v8.setFlagsFromString("--expose-gc");
  const gc = vm.runInNewContext("gc") as () => void;
  let finalized = false;
  // The registry is kept till the end (a collected registry calls back nothing); the object it
  // watches is made in another frame, after which a turn passes, so no register of ours still holds it.
  const canary = new FinalizationRegistry(() => { finalized = true; });
  plantGarbage(canary);
  await sleep(0);
  gc();
  for (let waited = 0; !finalized && waited < 2000; waited += 10) await sleep(10);
  keep(canary);
  assert.ok(finalized, "a forced collection finalized nothing: the test cannot show what a collection does to the server");
  // node-llama-cpp's own finalizers clear a sequence under a lock (an await): let them finish.
  await sleep(50);
}

function plantGarbage(registry: FinalizationRegistry<undefined>): void {
  registry.register({ garbage: true }, undefined);
}

/** Holds a value to here, where nothing else would (V8 may collect what a function no longer reads). */
function keep(value: object): void {
  if (value === null) throw new Error("unreachable");
}

async function serveInProcess(modelPath: string, draft: boolean): Promise<{ server: RunningServer; baseUrl: string }> {
  const server = await startServer({
    host: "127.0.0.1", port: 0, modelId: "self-draft", maxPromptTokens: 256, maxTokensCap: SHAPE.maxTokens, validation: { validated: false, note: "test" },
    modelPath, slots: SLOTS, maxQueue: 16, contextSize: 256, threads: 1, flashAttention: false, kvCacheType: "F16", batchSize: 512,
    promptCache: true, prefillChunk: 512, hostCacheMiB: 64, simulateBootSeconds: 0,
    ...(draft ? { speculation: { draftModelPath: modelPath, draftMax: SHAPE.draftMax } } : {}),
  });
  // A server that fails to boot still listens: shut it, or this process would never end.
  await server.ready.catch(async (error: unknown) => {
    await server.shutdown();
    throw error;
  });
  return { server, baseUrl: `http://127.0.0.1:${server.port}` };
}

const placing = suite("rejected drafts placed");
placing("a step that kept fewer drafts than it could ask for ends in a rejection; one short of max_tokens asks for fewer", () => {
  const shape = { ...SHAPE, maxTokens: 10, draftMax: 3 };
  const answer = (acceptedPositions: number[]) => ({ prompt: [], ids: Array.from({ length: 10 }, (_, i) => i), drafted: 0, accepted: acceptedPositions.length, acceptedPositions, cached: 0 });
  // Steps: 1-3 kept, 4 the target's; 5 kept, 6 the target's (a rejection); 7-8 kept, 9 the target's (room for 2 only).
  assert.equal(rejectedAt(answer([1, 2, 3, 5, 7, 8]), shape), [6]);
  // Every step kept all it asked for; the last token's step had no room to draft.
  assert.equal(rejectedAt(answer([1, 2, 3, 5, 6, 7]), shape), []);
  // Nothing kept: every step with room for a draft rejected it.
  assert.equal(rejectedAt(answer([]), shape), [1, 2, 3, 4, 5, 6, 7, 8]);
});
placing.run();

for (const family of SELF_DRAFT_FAMILIES) {
  const { model } = family;
  const familyTest = suite(model);
  let speculating: { server: RunningServer; baseUrl: string };
  let plain: { server: RunningServer; baseUrl: string };

  familyTest.before(async () => {
    reclaimed.length = 0;
    const path = (await resolveModel(model)).path;
    speculating = await serveInProcess(path, true);
    plain = await serveInProcess(path, false);
  });
  familyTest.after(async () => {
    await speculating?.server.shutdown();
    await plain?.server.shutdown();
  });

  familyTest(`${model}: a self-draft keeps every draft at ${CLIENTS} clients, a collection between turns, the same counts in both passes; answers equal the server's without a draft`, async () => {
    const passes = [await selfDraftPass(speculating.baseUrl, SHAPE, CLIENTS, collectGarbage), await selfDraftPass(speculating.baseUrl, SHAPE, CLIENTS, collectGarbage)];
    const { problems } = await judgeSelfDraft(family, passes, plain.baseUrl, SHAPE);
    assert.equal(problems, [], problems.join("; "));
    for (const [p, pass] of passes.entries()) {
      // The scenario happened: second turns continued from cached state (their slot's, or the host cache's).
      assert.ok(pass.second.every((a) => a.cached > 0), `pass ${p}: cached tokens of the second turns ${pass.second.map((a) => a.cached).join(", ")}`);
    }
    const metrics = (await httpCall(`${speculating.baseUrl}/metrics`)).text;
    const read = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(metrics)?.[1]);
    assert.ok(read("bench_prompt_cache_host_hits_total") > 0, "some second turn was restored from the host cache into a slot");
    await collectGarbage();
    assert.equal(reclaimed, [], "node-llama-cpp took back (and cleared) sequences of a running server: their objects were not held");
  });

  familyTest.run();
}
