/**
 * node dist/scripts/ttft-anatomy.js — where our server's first tokens spend their time, from the
 * repository alone. Starts `bench serve --trace-steps` with bench:server's settings (4 slots,
 * 2 threads, flash attention off, F16 KV, 256 tokens per slot, tiny-random:F32, prompt cache on),
 * runs bench:server's closed-loop load at one concurrency (streamed greedy requests of 32 prompt /
 * 64 output tokens, ignore_eos), then lines each client request up with the server's trace
 * (harness/load/ttft-anatomy.ts) and prints: client TTFT and its parts, step durations by what a
 * step held, and the slowest first tokens with the steps they waited through (docs/step-trace.md).
 *
 * BENCH_CONCURRENCY=N clients (default 4); BENCH_REQUESTS=N measured requests (default 320);
 * BENCH_THREADS, BENCH_PROMPT_CACHE=off as for bench:server; BENCH_TRACE_FILE=PATH keeps the trace
 * there (default: a new temporary directory, printed).
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { BenchError } from "../harness/errors.js";
import { resolveModel } from "../harness/fixtures/registry.js";
import { EXIT } from "../harness/results/exit-code.js";
import { describeMachine, machineInfo } from "../harness/results/machine.js";
import { distribution, type Distribution } from "../harness/stats/distribution.js";
import { randomPrompts } from "../harness/load/prompts.js";
import { runLoadPoint, warmupRequests } from "../harness/load/run-load.js";
import { epochClock, epochMsOf, joinAnatomy, slowestRequests, stepGroups, ttftPartDistributions, type ClientRequest, type RequestAnatomy, type StepGroup, type TtftPart } from "../harness/load/ttft-anatomy.js";
import { httpCall } from "../harness/sut/http-call.js";
import { startManagedServer, stopManagedServer, type ManagedServer } from "../harness/sut/managed-server.js";
import { parseStepTrace, promptKey, STEP_PHASES, type StepTrace } from "../server/step-trace.js";
import { wholeNumberFromEnv } from "./bench-env.js";
import { BATCH, CONTEXT_PER_SLOT, INPUT_TOKENS, OUTPUT_TOKENS, PROMPT_CACHE, SLOTS, THREADS } from "./server-load-settings.js";

const WARMUP = 2;
const SLOWEST = 10;

const f = (ms: number) => ms.toFixed(2);
const ladder = (d: Distribution) => `${f(d.median)} / ${f(d.p90)} / ${f(d.p99)}`;

const PART_LABELS: Readonly<Record<TtftPart, string>> = {
  sendToHandlerMs: "send → handler (network, the event loop busy)",
  handlerToSubmitMs: "handler → submit (body, validation, queueing)",
  submitToFirstWrittenMs: "submit → first token written (engine)",
  queuedMs: "  of which: submit → its admitting step began",
  firstWrittenToReadMs: "first token written → client read",
};

function describeParts(requests: readonly RequestAnatomy[]): string[] {
  const parts = ttftPartDistributions(requests);
  if (parts === undefined) return ["no request joined: nothing to take apart"];
  return [
    `client TTFT p50 / p90 / p99 / max: ${ladder(parts.ttft)} / ${f(parts.ttft.max)} ms over ${parts.ttft.n} requests; its parts, p50 / p90 / p99 ms:`,
    ...Object.entries(PART_LABELS).map(([part, label]) => `  ${label.padEnd(48)} ${ladder(parts.parts[part as TtftPart])}`),
  ];
}

function describeGroup(group: StepGroup): string {
  const phases = STEP_PHASES.filter((phase) => group.phases[phase].max > 0).map((phase) => {
    const d = group.phases[phase];
    return `${phase} ${f(d.median)}/${f(d.p90)}/${f(d.max)}`;
  });
  return `  admitted ${group.admitted}, decoding ${group.decoding}: ${group.ms.n} steps, ${f(group.ms.median)} / ${f(group.ms.p90)} / ${f(group.ms.max)} ms; ${phases.join(", ")}`;
}

function describeSlowest(request: RequestAnatomy): string {
  const steps = request.steps.map((s) => `#${s.step} a${s.admitted} d${s.decoding} ${f(s.ms)}${s.off_thread ? " off-thread" : ""}`).join(", ");
  return `  request ${request.index}: ${f(request.ttftMs)} ms = ${f(request.sendToHandlerMs)} + ${f(request.handlerToSubmitMs)} + ${f(request.submitToFirstWrittenMs)} (queued ${f(request.queuedMs)}) + ${f(request.firstWrittenToReadMs)}`
    + `${request.gcMs > 0 ? `, GC ${f(request.gcMs)}` : ""}; steps: ${steps}`;
}

function describeGc(trace: StepTrace, requests: readonly RequestAnatomy[]): string {
  const pauses = distribution(trace.gcs.map((g) => g.ms));
  if (pauses === undefined) return "GC: no pause while traced";
  const median = (of: readonly RequestAnatomy[]) => (of.length === 0 ? "none" : `${f(distribution(of.map((r) => r.ttftMs))!.median)} ms`);
  const paused = requests.filter((r) => r.gcMs > 0);
  return `GC: ${pauses.n} pauses, p50 / max ${f(pauses.median)} / ${f(pauses.max)} ms; ${paused.length} of ${requests.length} first-token waits held one (TTFT p50 ${median(paused)}, against ${median(requests.filter((r) => r.gcMs === 0))} for the rest)`;
}

async function anatomy(server: ManagedServer, traceFile: string, clients: number, requests: number): Promise<void> {
  const tokenize = async (text: string) => (JSON.parse((await httpCall(`${server.baseUrl}/tokenize`, { body: { content: text, add_special: true } })).text) as { tokens: number[] }).tokens;
  const plan = { mode: { kind: "closed", concurrency: clients }, requests, warmup: WARMUP, maxErrorRate: 1, seed: 0 } as const;
  const warmup = warmupRequests(plan).count;
  const prompts = (await randomPrompts(requests + warmup, INPUT_TOKENS, OUTPUT_TOKENS, 1, tokenize)).map((p) => p.prompt as number[]);
  const body = (index: number) => ({ model: "m", prompt: prompts[index % prompts.length], max_tokens: OUTPUT_TOKENS, temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true } });
  console.log(`machine: ${describeMachine(machineInfo())}; tiny-random:F32, ${SLOTS} slots, ${THREADS} threads, flash attention off, F16 KV, ${CONTEXT_PER_SLOT} tokens per slot, prompt cache ${PROMPT_CACHE ? "on" : "off"}; `
    + `${requests} streamed greedy requests of ${INPUT_TOKENS} prompt / ${OUTPUT_TOKENS} output tokens, closed loop at ${clients} client(s); load average ${loadavg().map((l) => l.toFixed(1)).join(" ")}`);
  const clock = epochClock();
  const result = await runLoadPoint({ url: `${server.baseUrl}/v1/completions`, body }, plan);
  await stopManagedServer(server);
  const trace = parseStepTrace(readFileSync(traceFile, "utf8"), traceFile);
  const answered = result.samples.filter((s) => s.status === "ok" && s.contentEventsNs.length > 0);
  const client: ClientRequest[] = answered.map((s) => ({
    index: s.index, key: promptKey(prompts[(warmup + s.index) % prompts.length]), sentMs: epochMsOf(s.sentNs, clock), firstReadMs: epochMsOf(s.contentEventsNs[0], clock),
  }));
  const joined = joinAnatomy(client, trace);
  const early = joined.requests.filter((r) => r.sendToHandlerMs < 0).length;
  console.log(`trace: ${traceFile} (${trace.steps.length} steps, ${trace.submits.length} prompts submitted); ${answered.length} of ${result.samples.length} requests answered, ${joined.requests.length} joined `
    + `(${joined.unmatched} unmatched, ${joined.ambiguous} ambiguous)${early > 0 ? `; WARNING: ${early} handler(s) began before the client sent, the two clocks disagree by up to ${f(-Math.min(...joined.requests.map((r) => r.sendToHandlerMs)))} ms` : ""}`);
  for (const line of describeParts(joined.requests)) console.log(line);
  console.log(describeGc(trace, joined.requests));
  console.log("step duration by what the step held, p50 / p90 / max ms, and each part's p50/p90/max (parts that never took time left out):");
  for (const group of stepGroups(trace.steps)) console.log(describeGroup(group));
  console.log(`the ${SLOWEST} slowest first tokens (TTFT = send→handler + handler→submit + submit→written + written→read; the steps between submit and first token, a = admitted, d = decoding, ms):`);
  for (const request of slowestRequests(joined.requests, SLOWEST)) console.log(describeSlowest(request));
  if (joined.requests.length === 0) throw new BenchError("no client request lined up with the trace", { file: traceFile, fix: "check that the server wrote it (bench serve --trace-steps) and that the requests were answered" });
}

let server: ManagedServer | undefined;
let code: number = EXIT.pass;
try {
  const clients = wholeNumberFromEnv("BENCH_CONCURRENCY", 4);
  const requests = wholeNumberFromEnv("BENCH_REQUESTS", 320);
  const traceFile = resolve(process.env.BENCH_TRACE_FILE ?? join(mkdtempSync(join(tmpdir(), "ttft-anatomy-")), "steps.jsonl"));
  const model = await resolveModel("tiny-random:F32");
  server = await startManagedServer({
    modelPath: model.path, slots: SLOTS, queue: 64, contextSize: CONTEXT_PER_SLOT, threads: THREADS, flashAttention: false, kvCacheType: "F16", batchSize: BATCH, promptCache: PROMPT_CACHE, bootTimeoutS: 120, traceSteps: traceFile,
  });
  await anatomy(server, traceFile, clients, requests);
} catch (error) {
  console.log(`ttft-anatomy: ERROR — ${error instanceof BenchError ? error.oneLine() : error instanceof Error ? error.message.split("\n")[0] : String(error)}`);
  code = EXIT.error;
} finally {
  // Stopped already when the run got that far; stopping a stopped server returns at once.
  if (server !== undefined) await stopManagedServer(server).catch(() => undefined);
}
process.exit(code);
