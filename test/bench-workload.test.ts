import { test } from "uvu";
import * as assert from "uvu/assert";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { meetsSlo } from "../harness/load/aggregate.js";
import { spreadPromptLengths } from "../harness/load/prompts.js";
import type { RequestMetrics } from "../harness/load/request-metrics.js";
import type { RequestSample } from "../harness/load/sse-request.js";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { builtLlamaServer } from "../harness/sut/llama-server-binary.js";
import type { Distribution } from "../harness/stats/distribution.js";
import { describeRatio, judgePoint, lossReason, sideFigures, UTF8_REFUSAL, workloadVerdict, type SideFigures } from "../scripts/workload-verdict.js";
import { temporaryDirectory, withoutForceColor } from "./helpers/workspace.js";

const work = temporaryDirectory("bench-workload");
test.after(() => work.remove());

test("prompt lengths spread log-uniformly over the range, both ends in every set, the same for the same seed", () => {
  const lengths = spreadPromptLengths(2000, 50, 4000, 7);
  assert.equal(lengths.slice(0, 2), [50, 4000]);
  assert.ok(lengths.every((n) => Number.isInteger(n) && n >= 50 && n <= 4000));
  // Log-uniform: half below the geometric mean (~447), as many in 50–200 as in 1,000–4,000.
  const below = lengths.filter((n) => n < Math.sqrt(50 * 4000)).length / lengths.length;
  assert.ok(below > 0.45 && below < 0.55, `share below the geometric mean ${below}`);
  const short = lengths.filter((n) => n <= 200).length;
  const long = lengths.filter((n) => n >= 1000).length;
  assert.ok(Math.abs(short - long) < 0.2 * long, `${short} prompts of 50–200 tokens against ${long} of 1,000–4,000`);
  assert.equal(spreadPromptLengths(20, 50, 4000, 7), lengths.slice(0, 20));
  assert.not.equal(spreadPromptLengths(20, 50, 4000, 8), lengths.slice(0, 20));
});

const metrics = (ttftMs: number, gaps: number[]): RequestMetrics => ({ ttftMs, e2eMs: ttftMs + gaps.reduce((a, b) => a + b, 0), tpotMs: gaps.reduce((a, b) => a + b, 0) / gaps.length, interChunkMs: gaps, outputTokens: gaps.length + 1, promptTokens: 10, cachedPromptTokens: undefined, tokenCountDiscrepancy: 0, clientLagMs: 0 });

test("a request meets the SLO's ITL bound by the p99 of its own gaps: one stall fails it where its mean (TPOT) would not", () => {
  const steady = Array.from({ length: 31 }, () => 20);
  const stalled = [...steady.slice(1), 600];
  assert.ok(meetsSlo({ ttftMs: 1000, interChunkP99Ms: 100 }, metrics(900, steady)));
  assert.not.ok(meetsSlo({ ttftMs: 1000, interChunkP99Ms: 100 }, metrics(900, stalled)), "one 600 ms gap among 31");
  assert.ok(meetsSlo({ ttftMs: 1000, tpotMs: 100 }, metrics(900, stalled)), "its mean gap is 38 ms");
  assert.not.ok(meetsSlo({ ttftMs: 800, interChunkP99Ms: 100 }, metrics(900, steady)), "TTFT over");
});

function sample(overrides: Partial<RequestSample>): RequestSample {
  return { index: 0, scheduledNs: 0n, sentNs: 0n, status: "ok", httpStatus: 200, error: null, contentEventsNs: [], doneNs: null, usage: null, clientTokens: 0, attempts: 1, ...overrides };
}

test("a lost request's reason: llama-server's refusal of text that is not UTF-8 by name, any other server's error message, a connection's failure", () => {
  const refusal = sample({ status: "http_error", httpStatus: 500, error: '{"error":{"code":500,"message":"The model produced output that does not match the expected Content-only format","type":"server_error"}}' });
  assert.is(lossReason(refusal), UTF8_REFUSAL);
  assert.is(lossReason(sample({ status: "http_error", httpStatus: 500, error: '{"error":{"message":"every sequence needs\\n at least one token"}}' })), "HTTP 500: every sequence needs at least one token");
  assert.is(lossReason(sample({ status: "http_error", httpStatus: 429, error: '{"error":"queue full"}' })), "HTTP 429: queue full");
  assert.is(lossReason(sample({ status: "connection_error", httpStatus: null, error: "connect ECONNREFUSED 127.0.0.1:1" })), "connection_error: connect ECONNREFUSED 127.0.0.1:1");
});

test("one side's figures: every streamed token counts toward tok/s, a lost one's too; latencies and goodput from completed requests; losses by reason", () => {
  const ms = (n: number) => BigInt(Math.round(n * 1e6));
  const ok = (index: number, firstMs: number) => sample({ index, contentEventsNs: [ms(firstMs), ms(firstMs + 10), ms(firstMs + 20)], doneNs: ms(firstMs + 21), usage: { promptTokens: 5, completionTokens: 3 }, clientTokens: 3 });
  const lost = sample({ index: 2, status: "stream_error", httpStatus: 200, error: "connection lost mid-stream: other side closed", contentEventsNs: [ms(5)], clientTokens: 1 });
  const figures = sideFigures([ok(0, 100), ok(1, 3000), lost], 2, { ttftMs: 1000, interChunkP99Ms: 50 }, { peakRssBytes: 2 ** 30, cpuSeconds: 0.7 });
  assert.is(figures.outputTokensPerSecond, (3 + 3 + 1) / 2);
  assert.equal([figures.sent, figures.completed, figures.good], [3, 2, 1]);
  assert.is(figures.goodputPerSecond, 0.5);
  assert.is(figures.ttftMs?.n, 2);
  assert.is(figures.cpuMsPerToken, 100);
  assert.equal(figures.losses, { "stream_error: connection lost mid-stream: other side closed": 1 });
});

const dist = (p50: number, p99: number): Distribution => ({ n: 100, mean: p50, stderr: 0, std: 0, min: 0, max: p99, p0_1: 0, p1: 0, p5: 0, p10: 0, median: p50, p90: p99, p95: p99, p99, p99_9: p99 });
const side = (overrides: Partial<SideFigures> = {}): SideFigures => ({
  sent: 16, completed: 16, outputTokensPerSecond: 100, ttftMs: dist(100, 1000), itlMs: dist(20, 100), good: 16, goodputPerSecond: 1, peakRssBytes: 300 * 2 ** 20, cpuMsPerToken: 10, losses: {}, ...overrides,
});

test("a point meets the targets exactly at their bounds and misses each just past it; what was not measured misses; only our losses count", () => {
  assert.equal(judgePoint(side({ peakRssBytes: 500 * 2 ** 20, itlMs: dist(20, 110) }), side()).misses, [], "tok/s 1.0×, TTFT p99 1.0×, ITL p99 1.1×, RSS +200 MiB");
  assert.equal(judgePoint(side({ outputTokensPerSecond: 99 }), side()).misses, ["tok/s 0.99×"]);
  assert.equal(judgePoint(side({ ttftMs: dist(100, 1010) }), side()).misses, ["TTFT p99 1.01×"]);
  assert.equal(judgePoint(side({ itlMs: dist(20, 111) }), side()).misses, ["ITL p99 1.11×"]);
  assert.equal(judgePoint(side({ peakRssBytes: 501 * 2 ** 20 }), side()).misses, ["peak RSS +201 MiB"]);
  assert.equal(judgePoint(side({ completed: 15, losses: { "HTTP 500: x": 1 } }), side()).misses, ["ours lost 1"]);
  assert.equal(judgePoint(side(), side({ completed: 13, losses: { [UTF8_REFUSAL]: 3 } })).misses, [], "llama-server's losses are its own");
  assert.equal(judgePoint(side({ ttftMs: undefined, itlMs: undefined, peakRssBytes: undefined }), side()).misses, ["TTFT p99 not measured", "ITL p99 not measured", "peak RSS not measured"]);
});

test("an open loop's tok/s is reported and not judged: the arrival rate sets it; its latencies are", () => {
  const slower = side({ outputTokensPerSecond: 90, ttftMs: dist(100, 2000) });
  assert.equal(judgePoint(slower, side(), false).misses, ["TTFT p99 2.00×"]);
  assert.equal(judgePoint(slower, side(), true).misses, ["tok/s 0.90×", "TTFT p99 2.00×"]);
});

test("a ratio that two digits would round onto its bound gets a third", () => {
  assert.is(describeRatio(0.996, 1), "0.996×");
  assert.is(describeRatio(1, 1), "1.00×");
  assert.is(describeRatio(1.104, 1.1), "1.104×");
  assert.is(describeRatio(0.93, 1), "0.93×");
  assert.is(describeRatio(NaN), "n/a");
  assert.is(describeRatio(2 / 0), "∞");
  assert.equal(judgePoint(side({ outputTokensPerSecond: 99.6 }), side()).misses, ["tok/s 0.996×"]);
});

test("the verdict: exit 0 only when every point met every target, 1 otherwise (no point measured included), llama-server's losses said with their reason", () => {
  const rounds = { total: 4, repeated: 1, stillBusy: 0 };
  const point = (label: string, ours: SideFigures, theirs = side()) => ({ label, ours, theirs, judgement: judgePoint(ours, theirs) });
  const pass = workloadVerdict([point("closed 1", side()), point("open 0.5/s", side(), side({ completed: 14, losses: { [UTF8_REFUSAL]: 2 } }))], rounds);
  assert.is(pass.code, 0);
  assert.is(pass.line, `bench:workload verdict: PASS — every target met at closed 1, open 0.5/s; lost requests: ours 0 of 32, llama-server 2 of 32 (2: ${UTF8_REFUSAL}); 1 of 4 rounds measured again for a busy machine, 0 still busy after every attempt`);
  const fail = workloadVerdict([point("closed 1", side()), point("closed 64", side({ outputTokensPerSecond: 50 }))], rounds);
  assert.is(fail.code, 1);
  assert.match(fail.line, /^bench:workload verdict: FAIL — missed at closed 64 \(tok\/s 0\.50×\); /);
  assert.is(workloadVerdict([], rounds).code, 1);
});

/** Runs the script as `npm run bench:workload` does (compiled), with settings in the environment. */
function runScript(env: Record<string, string>) {
  return spawnSync(process.execPath, [join(PACKAGE_ROOT, "dist", "scripts", "bench-workload.js")], {
    cwd: PACKAGE_ROOT, encoding: "utf8", timeout: 20 * 60_000, env: { ...withoutForceColor(process.env), NO_COLOR: "1", ...env },
  });
}

const assertOneLineError = (result: ReturnType<typeof runScript>, pattern: RegExp) => {
  assert.is(result.status, 2, result.stdout + result.stderr);
  const lines = result.stdout.trim().split("\n");
  assert.match(lines.at(-1)!, pattern);
  assert.not.match(result.stdout + result.stderr, /^\s+at /m, "no stack");
};

test("a bad setting, and a server of ours that cannot start, end in one line and exit 2", () => {
  assertOneLineError(runScript({ BENCH_CLIENTS: "1,four" }), /^bench:workload verdict: ERROR — .*BENCH_CLIENTS.* \(after 0 points\)$/);
  assertOneLineError(runScript({ BENCH_VOCAB: join(work.path, "missing.gguf"), BENCH_CLIENTS: "1", BENCH_RATES: "" }), /^bench:workload verdict: ERROR — ours \(bench serve\): the server exited \(code \d+\) before listening: .* \(after 0 points\)$/);
});

test("a llama-server that dies as it starts (FAKE) ends the run in one line, exit 2, our server stopped", () => {
  // FAKE: the build script's cache, in a directory of our own, holds tools that exit at once.
  const cache = join(work.path, "build-cache");
  const env = { BENCH_BUILD_CACHE_DIR: cache };
  const path = spawnSync("bash", [join(PACKAGE_ROOT, "scripts", "build-llama-server.sh"), "--path"], { encoding: "utf8", env: { ...process.env, ...env } }).stdout.trim();
  mkdirSync(dirname(path), { recursive: true });
  for (const tool of ["llama-server", "llama-perplexity", "llama-tokenize"]) {
    writeFileSync(join(dirname(path), tool), "#!/bin/sh\necho 'FAKE: refuses to start' >&2\nexit 3\n");
    chmodSync(join(dirname(path), tool), 0o755);
  }
  const result = runScript({ ...env, BENCH_VOCAB: "tiny-random:F32", BENCH_CLIENTS: "1", BENCH_RATES: "" });
  assertOneLineError(result, /^bench:workload verdict: ERROR — llama-server: the server exited \(code 3\) while booting: FAKE: refuses to start .* \(after 0 points\)$/);
  assert.not.match(result.stdout, /note: stopping ours/, "ours stopped cleanly");
});

// Not built here (scripts/build-llama-server.sh): skipped, never passed; CI builds it and requires it.
const llamaServerRequired = builtLlamaServer() !== undefined || process.env.BENCH_REQUIRE_LLAMA_SERVER === "1";
(llamaServerRequired ? test : test.skip)("a small run side by side: each point's figures for both servers, the table, and a verdict line whose word is its exit code", () => {
  const result = runScript({ BENCH_VOCAB: "tiny-random:F32", BENCH_CLIENTS: "2", BENCH_RATES: "4", BENCH_REQUESTS: "4", BENCH_PROMPT_MAX: "300", BENCH_OUTPUT_TOKENS: "8", BENCH_BUSY_ATTEMPTS: "1" });
  const lines = result.stdout.trim().split("\n");
  const verdict = lines.at(-1)!;
  assert.match(verdict, /^bench:workload verdict: (PASS|FAIL) — /, result.stdout + result.stderr);
  assert.is(result.status, verdict.includes("PASS") ? 0 : 1, verdict);
  assert.match(result.stdout, /goodput SLO: a completed request with TTFT ≤ \d+ ms and its own ITL p99 ≤ \d+ ms/);
  assert.match(result.stdout, /top_k 0 and min_p 0 sent to both \(llama-server's defaults would add top_k 40, min_p 0\.05\)/);
  for (const label of ["closed 2", "open 4/s"]) {
    assert.match(result.stdout, new RegExp(`^${label} \\(.*\\): 4 requests, 2 sampled, prompts 50–300 tokens`, "m"));
    const row = lines.find((line) => line.startsWith(`| ${label} |`));
    assert.ok(row !== undefined, `table row for ${label}`);
    // Both sides streamed tokens and a peak RSS was read for each: figures, not "n/a".
    const ratio = String.raw`(\d+\.\d{2,3}×|∞|n/a)`;
    assert.match(row!, new RegExp(String.raw`^\| ${label} \| \d+\.\d / \d+\.\d \(${ratio}[^)]*\) \| \d+ / \d+ \(${ratio}\) \| \d+ / \d+ \(${ratio}\) \| [\d.]+ / [\d.]+ \([^)]+\) \| \d+ / \d+ \| \d+ / \d+ of 4 \| [^|]+ \|$`), row);
  }
  assert.match(verdict, /lost requests: ours \d+ of 8/);
});

test.run();
