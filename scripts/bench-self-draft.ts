/**
 * npm run bench:self-draft — our server speculating with a draft model identical to its target,
 * which must keep every draft: per family's F32 fixture, at 1 and at 4 clients, two passes of the
 * same requests through one `bench serve --draft-model` (harness/load/self-draft.ts: conversations
 * of two turns sharing a prefix, more of them than the 4 slots, the host prompt cache on). Prints
 * per pass what was drafted and kept, and what falls short of the bar judgeSelfDraft holds it
 * to (and what that bar forgave): every draft kept, the same counts request for request in both passes, every answer the cold
 * answer of the same server without a draft model (gemma4 up to its batch-shape noise).
 * Ends with one verdict line; exit 0 met on every family; 1 otherwise; 2 could not run.
 *
 * BENCH_MODELS=a,b picks fixtures (default the five families); BENCH_THREADS (default 2),
 * BENCH_DRAFT_MAX (default 3), BENCH_CLIENTS (default 1,4) override.
 */
import { resolveModel } from "../harness/fixtures/registry.js";
import { describeMachine, machineInfo } from "../harness/results/machine.js";
import { EXIT } from "../harness/results/exit-code.js";
import { judgeSelfDraft, passTotals, SELF_DRAFT_FAMILIES, selfDraftPass, type SelfDraftFamily, type SelfDraftShape } from "../harness/load/self-draft.js";
import { startManagedServer, stopManagedServer, type ManagedServer } from "../harness/sut/managed-server.js";

const MODELS = process.env.BENCH_MODELS?.split(",");
const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const CLIENT_COUNTS = (process.env.BENCH_CLIENTS ?? "1,4").split(",").map(Number);
const SLOTS = 4;
const HOST_CACHE_MIB = 64;
const SHAPE: SelfDraftShape = { conversations: 8, sharedPrefix: 40, ownTokens: 10, maxTokens: 48, draftMax: Number(process.env.BENCH_DRAFT_MAX ?? 3) };

function serve(modelPath: string, draft: boolean, servers: ManagedServer[]): Promise<ManagedServer> {
  return startManagedServer({
    modelPath, slots: SLOTS, queue: 16, contextSize: 256, threads: THREADS, flashAttention: false, kvCacheType: "F16", hostCacheMiB: HOST_CACHE_MIB, bootTimeoutS: 300,
    ...(draft ? { draftModel: modelPath, draftMax: SHAPE.draftMax } : {}),
  }).then((server) => {
    servers.push(server);
    return server;
  });
}

async function stop(server: ManagedServer, servers: ManagedServer[]): Promise<void> {
  servers.splice(servers.indexOf(server), 1);
  await stopManagedServer(server);
}

/** One family at every client count: its lines, and whether it met the bar. */
async function benchFamily(family: SelfDraftFamily, servers: ManagedServer[]): Promise<{ met: boolean; line: string }> {
  const path = (await resolveModel(family.model)).path;
  const plain = await serve(path, false, servers);
  let met = true;
  const cells: string[] = [];
  for (const clients of CLIENT_COUNTS) {
    const speculating = await serve(path, true, servers);
    const passes = [await selfDraftPass(speculating.baseUrl, SHAPE, clients), await selfDraftPass(speculating.baseUrl, SHAPE, clients)];
    await stop(speculating, servers);
    const { problems, forgiven } = await judgeSelfDraft(family, passes, plain.baseUrl, SHAPE);
    met &&= problems.length === 0;
    const kept = passes.map(passTotals).map((t) => `${t.accepted}/${t.drafted} (${(100 * t.accepted / t.drafted).toFixed(1)}%)`).join(" then ");
    console.log(`${family.model} at ${clients} client${clients === 1 ? "" : "s"}: kept/drafted ${kept}; ${problems.length === 0 && forgiven.length === 0 ? "every answer the plain server's, the same counts in both passes" : [...problems, ...forgiven.map((f) => `forgiven: ${f}`)].join("; ")}`);
    cells.push(`${clients}c ${kept}`);
  }
  await stop(plain, servers);
  return { met, line: `${family.model} ${met ? "met" : "missed"} (${cells.join(", ")})` };
}

const servers: ManagedServer[] = [];
let verdict: { line: string; code: number };
try {
  console.log(`machine: ${describeMachine(machineInfo())}; self-draft (the target's own file), draft-max ${SHAPE.draftMax}, ${SLOTS} slots, ${THREADS} threads, F16 KV, host cache ${HOST_CACHE_MIB} MiB; `
    + `${SHAPE.conversations} conversations × 2 turns sharing a ${SHAPE.sharedPrefix}-token prefix, ${SHAPE.maxTokens} tokens a turn, two passes per client count`);
  const families = [];
  const unknown = MODELS?.filter((model) => !SELF_DRAFT_FAMILIES.some((f) => f.model === model)) ?? [];
  if (unknown.length > 0) throw new Error(`BENCH_MODELS: ${unknown.join(", ")} is not a family here (fix: name some of ${SELF_DRAFT_FAMILIES.map((f) => f.model).join(", ")})`);
  for (const family of SELF_DRAFT_FAMILIES.filter((f) => MODELS === undefined || MODELS.includes(f.model))) families.push(await benchFamily(family, servers));
  const met = families.every((f) => f.met);
  verdict = { code: met ? EXIT.pass : EXIT.gateFailed, line: `bench:self-draft verdict: ${met ? "PASS" : "FAIL"} — ${families.map((f) => f.line).join("; ")}` };
} catch (error) {
  verdict = { line: `bench:self-draft verdict: ERROR — ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`, code: EXIT.error };
}
for (const server of servers) await stopManagedServer(server).catch(() => undefined);
console.log(verdict.line);
process.exit(verdict.code);
