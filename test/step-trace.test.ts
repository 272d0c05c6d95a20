/**
 * `bench serve --trace-steps` (server/step-trace.ts) and the join scripts/ttft-anatomy.ts prints
 * (harness/load/ttft-anatomy.ts): the join on a small trace written by hand, the writer's failure
 * paths, and a real trace from a real server on loopback whose lines must line up — every request's
 * events in order, every first token inside the step that produced it, each step's parts adding up.
 */
import { test } from "uvu";
import * as assert from "uvu/assert";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { resolveModel } from "../harness/fixtures/registry.js";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { BenchError } from "../harness/errors.js";
import { runLoadPoint } from "../harness/load/run-load.js";
import { epochClock, epochMsOf, joinAnatomy, slowestRequests, stepGroups, stepsBetween, ttftPartDistributions } from "../harness/load/ttft-anatomy.js";
import { httpCall } from "../harness/sut/http-call.js";
import { startManagedServer, stopManagedServer } from "../harness/sut/managed-server.js";
import { parseStepTrace, promptKey, STEP_PHASES, StepTracer, type StepLine, type StepTrace } from "../server/step-trace.js";
import { bench, CLI_HANG_GUARD_MS, temporaryDirectory, withoutForceColor } from "./helpers/workspace.js";

const HEADER = { format: "bench-step-trace", version: 1, t: 1000, pid: 1, settings: {} };
const phases = (decode: number) => Object.fromEntries(STEP_PHASES.map((p) => [p, p === "decode" ? decode : 0]));
const step = (n: number, t: number, ms: number, admitted: number, decoding: number) => ({ ev: "step", step: n, t, ms, admitted, decoding, prompt_tokens: 32 * admitted, decode_tokens: decoding, off_thread: false, phases_ms: phases(ms) });
const jsonl = (lines: readonly object[]) => lines.map((line) => JSON.stringify(line)).join("\n");

/** Two requests, the second queued behind the first's step: A's key "a1", B's "b2", and a prompt "dd" submitted twice. */
function handTrace(): StepTrace {
  return parseStepTrace(jsonl([
    HEADER,
    { ev: "http", req: 1, t: 1001, path: "/v1/completions" },
    { ev: "submit", job: 1, req: 1, t: 1001.5, prompt_tokens: 32, key: "a1" },
    { ev: "admit", job: 1, step: 1, t: 1002.1 },
    { ev: "http", req: 2, t: 1003, path: "/v1/completions" },
    { ev: "submit", job: 2, req: 2, t: 1003.2, prompt_tokens: 32, key: "b2" },
    { ev: "first", job: 1, step: 1, t: 1005.5, written: 1005.6 },
    step(1, 1002, 4, 1, 0),
    { ev: "admit", job: 2, step: 2, t: 1006.1 },
    { ev: "first", job: 2, step: 2, t: 1007.8, written: 1008 },
    step(2, 1006, 2, 1, 1),
    step(3, 1008, 0.5, 0, 2),
    { ev: "http", req: 3, t: 1009, path: "/v1/completions" },
    { ev: "submit", job: 3, req: 3, t: 1009.1, prompt_tokens: 32, key: "dd" },
    { ev: "http", req: 4, t: 1009.2, path: "/v1/completions" },
    { ev: "submit", job: 4, req: 4, t: 1009.3, prompt_tokens: 32, key: "dd" },
    { ev: "gc", t: 1007.5, ms: 1, kind: "minor" },
    { ev: "gc", t: 1000, ms: 0.2, kind: "minor" },
  ]), "hand.jsonl");
}

test("the join splits each client TTFT into its parts, and leaves out what it cannot name", () => {
  const joined = joinAnatomy([
    { index: 0, key: "a1", sentMs: 1000.5, firstReadMs: 1006.0 },
    { index: 1, key: "b2", sentMs: 1002.9, firstReadMs: 1008.4 },
    { index: 2, key: "dd", sentMs: 1008.9, firstReadMs: 1012 },
    { index: 3, key: "zz", sentMs: 1009, firstReadMs: 1013 },
  ], handTrace());
  assert.is(joined.ambiguous, 1, "a prompt submitted twice is not guessed at");
  assert.is(joined.unmatched, 1, "a key the trace lacks");
  const [a, b] = joined.requests;
  const close = (actual: number, expected: number, what: string) => assert.ok(Math.abs(actual - expected) < 1e-9, `${what}: ${actual} vs ${expected}`);
  close(a.ttftMs, 5.5, "A's TTFT");
  close(a.sendToHandlerMs, 0.5, "A send→handler");
  close(a.handlerToSubmitMs, 0.5, "A handler→submit");
  close(a.submitToFirstWrittenMs, 4.1, "A submit→written");
  close(a.queuedMs, 0.5, "A waited from submit to its step's start");
  close(a.firstWrittenToReadMs, 0.4, "A written→read");
  close(b.queuedMs, 2.8, "B waited for A's step to end");
  assert.equal(b.steps.map((s) => s.step), [1, 2], "B waited through A's step and its own");
  assert.equal(a.steps.map((s) => s.step), [1]);
  assert.is(a.gcMs, 0, "A's wait held no pause (the one before it ended before A was sent)");
  close(b.gcMs, 0.9, "B's wait held 0.9 ms of a 1 ms pause (its read came before the pause ended)");
  for (const r of joined.requests) close(r.sendToHandlerMs + r.handlerToSubmitMs + r.submitToFirstWrittenMs + r.firstWrittenToReadMs, r.ttftMs, `request ${r.index}'s parts add up`);
  assert.equal(slowestRequests(joined.requests, 1).map((r) => r.index), [0]);
  const parts = ttftPartDistributions(joined.requests)!;
  close(parts.ttft.max, 5.5, "TTFT max");
  close(parts.parts.queuedMs.median, 1.65, "queued p50 of 0.5 and 2.8");
  assert.is(ttftPartDistributions([]), undefined, "no requests, no figures");
});

test("steps group by what they held; stepsBetween finds the steps that meet an interval", () => {
  const trace = handTrace();
  const groups = stepGroups(trace.steps);
  assert.equal(groups.map((g) => [g.admitted, g.decoding, g.ms.n]), [[0, 2, 1], [1, 0, 1], [1, 1, 1]]);
  assert.is(groups[1].phases.decode.max, 4);
  const steps = trace.steps as StepLine[];
  assert.equal(stepsBetween(steps, 1006.05, 1006.5).map((s) => s.step), [2], "an interval after a step's end does not meet it");
  assert.equal(stepsBetween(steps, 1000, 1001).map((s) => s.step), [], "before the first step");
  assert.equal(stepsBetween(steps, 1003, 1008.2).map((s) => s.step), [1, 2, 3]);
});

test("a trace that is not one (another format, a newer version, a truncated line) is refused naming the file and the line", () => {
  const refused = (text: string, line: string) => {
    try {
      parseStepTrace(text, "t.jsonl");
      assert.unreachable("parsed");
    } catch (error) {
      assert.instance(error, BenchError);
      assert.match((error as BenchError).oneLine(), `t.jsonl: ${line}: `);
    }
  };
  refused(jsonl([{ ...HEADER, version: 2 }]), "line 1");
  refused(jsonl([{ format: "other" }]), "line 1");
  refused(`${jsonl([HEADER])}\n{"ev":"step","step":1`, "line 2");
  refused(jsonl([HEADER, { ev: "admit", job: 1, t: 5 }]), "line 2");
  refused(jsonl([HEADER, { ev: "nap", t: 5 }]), "line 2");
});

test("promptKey names a prompt by its ids: the same ids the same key, a change anywhere another", () => {
  const ids = [1, 520, 33, 70000, 4];
  assert.is(promptKey(ids), promptKey([...ids]));
  assert.match(promptKey(ids), /^[0-9a-f]{8}$/);
  const changed = new Set([promptKey(ids), promptKey([520, 1, 33, 70000, 4]), promptKey([1, 520, 33, 70001, 4]), promptKey(ids.slice(0, 4)), promptKey([])]);
  assert.is(changed.size, 5);
});

test("the writer never takes the server down: a trace it cannot put in place is one warning, and a file it cannot open a one-line error naming --trace-steps", async () => {
  const dir = temporaryDirectory("step-trace-writer");
  const warnings: string[] = [];
  const tracer = new StepTracer(join(dir.path, "steps.jsonl"), {}, (message) => warnings.push(message));
  tracer.stepStarted(performance.now());
  tracer.stepEnded();
  dir.remove();
  await tracer.close();
  assert.is(warnings.length, 1, warnings.join("\n"));
  assert.match(warnings[0], "steps.jsonl: ENOENT; tracing stopped");
  tracer.stepStarted(performance.now());
  tracer.stepEnded();
  await tracer.close();
  assert.is(warnings.length, 1, "after the warning, tracing is off and silent");

  const result = bench(["serve", "--model", "tiny-random:F32", "--unvalidated", "--port", "0", "--trace-steps", "/nonexistent-dir/steps.jsonl"]);
  assert.is(result.status, 2, result.stderr);
  assert.match(result.stderr, "/nonexistent-dir/steps.jsonl: --trace-steps: cannot write the step trace (ENOENT)");
});

/** How far two processes' epoch clocks may sit apart before the join is called wrong. */
const CLOCK_SKEW_MS = 25;

test("a real server's trace: three streamed requests line up, each first token inside the step that made it, each step's parts adding up", async () => {
  const model = await resolveModel("tiny-random:F32");
  const dir = temporaryDirectory("step-trace");
  const file = join(dir.path, "steps.jsonl");
  const server = await startManagedServer({ modelPath: model.path, slots: 2, queue: 4, contextSize: 256, threads: 1, flashAttention: false, kvCacheType: "F16", batchSize: 512, bootTimeoutS: 120, traceSteps: file });
  let stopped = false;
  try {
    const [batchedA, batchedB, ...prompts] = await Promise.all(["two prompts", "in one request", "the first prompt", "a second, longer prompt to prefill", "and a third"].map(async (content) => (JSON.parse((await httpCall(`${server.baseUrl}/tokenize`, { body: { content, add_special: true } })).text) as { tokens: number[] }).tokens));
    const clock = epochClock();
    // Three clients and two slots: one request waits in the queue, and is admitted beside the slot whose request is longer.
    const load = await runLoadPoint({ url: `${server.baseUrl}/v1/completions`, body: (i) => ({ prompt: prompts[i], max_tokens: 6 + 4 * i, temperature: 0, ignore_eos: true, stream: true }) },
      { mode: { kind: "closed", concurrency: 3 }, requests: 3, warmup: 0, maxErrorRate: 0, seed: 0 });
    assert.equal(load.samples.map((s) => s.status), ["ok", "ok", "ok"]);
    // Two prompts in one request reach an idle engine in the same turn: the case admissionsThisStep decides.
    const batched = await httpCall(`${server.baseUrl}/v1/completions`, { body: { prompt: [batchedA, batchedB], max_tokens: 2, temperature: 0 } });
    assert.is(batched.status, 200, batched.text);
    await stopManagedServer(server);
    stopped = true;
    const trace = parseStepTrace(readFileSync(file, "utf8"), file);
    assert.is(trace.header.settings.slots, 2, "the header carries the server's settings");
    assert.is(trace.http.length, 4);
    assert.equal(trace.submits.map((s) => s.key).sort(), [...prompts, batchedA, batchedB].map(promptKey).sort(), "each prompt submitted once, under the key a client computes");
    assert.equal(trace.steps.map((s) => s.step), trace.steps.map((_, i) => i + 1), "steps numbered in order, none missing");
    for (const s of trace.steps) {
      const sum = STEP_PHASES.reduce((total, phase) => total + s.phases_ms[phase], 0);
      assert.ok(Math.abs(sum - s.ms) < 0.01, `step ${s.step}: parts ${sum} ms vs ${s.ms} ms`);
    }
    for (const [i, s] of trace.steps.slice(1).entries()) assert.ok(s.t >= trace.steps[i].t + trace.steps[i].ms - 0.002, `step ${s.step} began before step ${s.step - 1} ended`);
    const steps = new Map(trace.steps.map((s) => [s.step, s]));
    for (const submit of trace.submits) {
      const handler = trace.http.find((h) => h.req === submit.req)!;
      const admit = trace.admits.find((a) => a.job === submit.job)!;
      const first = trace.firsts.find((f) => f.job === submit.job)!;
      assert.ok(handler.t <= submit.t && submit.t <= admit.t && admit.t <= first.t && first.t <= first.written, `job ${submit.job}: handler ${handler.t}, submit ${submit.t}, admit ${admit.t}, first ${first.t}, written ${first.written}`);
      const made = steps.get(first.step)!;
      assert.ok(made.t <= first.t && first.written <= made.t + made.ms + 0.002, `job ${submit.job}'s first token (${first.t}) lies in step ${made.step} (${made.t} + ${made.ms} ms)`);
      assert.ok(steps.get(admit.step)!.admitted >= 1 && admit.step <= first.step);
    }
    assert.ok(trace.steps.some((s) => s.admitted >= 1 && s.decoding >= 1), "the queued request was admitted beside a decoding slot");
    assert.ok(trace.steps.every((s) => s.admitted <= 1), `every step admits at most one request, the two prompts of one request into an idle engine too (admissionsThisStep): ${trace.steps.map((s) => s.admitted).join(",")}`);
    assert.ok(trace.steps.some((s) => s.prompt_tokens > 0) && trace.steps.some((s) => s.decode_tokens > 0));
    const joined = joinAnatomy(load.samples.map((s) => ({ index: s.index, key: promptKey(prompts[s.index]), sentMs: epochMsOf(s.sentNs, clock), firstReadMs: epochMsOf(s.contentEventsNs[0], clock) })), trace);
    assert.is(joined.requests.length, 3, `unmatched ${joined.unmatched}, ambiguous ${joined.ambiguous}`);
    for (const r of joined.requests) {
      // The client's and the server's clocks are separate processes' readings of the wall clock, each fixed at its
      // process's start (performance.timeOrigin): a clock slewed between the two starts offsets one part by what it
      // adds to the other (CI measured +6.6 / -2.9 ms). Their sum is free of that offset; each part alone only of gross error.
      assert.ok(r.sendToHandlerMs + r.firstWrittenToReadMs > -0.5, `request ${r.index}: the two network legs sum below zero (send→handler ${r.sendToHandlerMs} ms, written→read ${r.firstWrittenToReadMs} ms)`);
      assert.ok(r.sendToHandlerMs > -CLOCK_SKEW_MS && r.firstWrittenToReadMs > -CLOCK_SKEW_MS, `request ${r.index}: the clocks disagree by more than ${CLOCK_SKEW_MS} ms (send→handler ${r.sendToHandlerMs} ms, written→read ${r.firstWrittenToReadMs} ms)`);
      assert.ok(r.submitToFirstWrittenMs < r.ttftMs, `request ${r.index}: the engine's part lies inside the client's wait`);
      assert.ok(r.steps.length >= 1);
    }
  } finally {
    if (!stopped) await stopManagedServer(server);
    dir.remove();
  }
});

test("scripts/ttft-anatomy.js takes a short load run apart end to end, and refuses a concurrency list in one line", () => {
  const script = join(PACKAGE_ROOT, "dist", "scripts", "ttft-anatomy.js");
  const dir = temporaryDirectory("ttft-anatomy");
  const run = (env: Record<string, string>) => spawnSync(process.execPath, [script], { cwd: PACKAGE_ROOT, encoding: "utf8", timeout: CLI_HANG_GUARD_MS, env: { ...withoutForceColor(process.env), NO_COLOR: "1", ...env } });
  try {
    const file = join(dir.path, "steps.jsonl");
    const result = run({ BENCH_REQUESTS: "8", BENCH_CONCURRENCY: "2", BENCH_TRACE_FILE: file });
    assert.is(result.status, 0, result.stdout + result.stderr);
    assert.match(result.stdout, `trace: ${file} (`);
    assert.match(result.stdout, "8 of 8 requests answered, 8 joined (0 unmatched, 0 ambiguous)");
    assert.match(result.stdout, /client TTFT p50 \/ p90 \/ p99 \/ max: [\d.]+ \/ [\d.]+ \/ [\d.]+ \/ [\d.]+ ms over 8 requests/);
    assert.is(result.stdout.split("\n").filter((line) => /^ {2}request \d+: /.test(line)).length, 8, "every request among the slowest when there are fewer than ten");
    assert.ok(parseStepTrace(readFileSync(file, "utf8"), file).steps.length > 0, "the trace is kept where BENCH_TRACE_FILE says");
    const refused = run({ BENCH_CONCURRENCY: "1,4" });
    assert.is(refused.status, 2);
    assert.is(refused.stdout.trim(), 'ttft-anatomy: ERROR — BENCH_CONCURRENCY: must be a whole number ≥ 1 (got "1,4") (fix: unset it, or give e.g. BENCH_CONCURRENCY=4)');
  } finally {
    dir.remove();
  }
});

test.run();
