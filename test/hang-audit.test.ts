import { test } from "uvu";
import * as assert from "uvu/assert";
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { resolveBoxSettings } from "../harness/box/config.js";
import { BenchError } from "../harness/errors.js";
import { resolveModel } from "../harness/fixtures/registry.js";
import { SUITES_DIR } from "../harness/paths.js";
import { openArmSut, type OpenSut } from "../harness/runner/open-sut.js";
import type { GateVerdict } from "../harness/results/types.js";
import type { RunOptions } from "../harness/runner/run-options.js";
import { startBenchServe, waitHealthy } from "./helpers/bench-serve.js";
import { describeRun, runInProcess } from "./helpers/in-process-run.js";
import { startSilentServer } from "./helpers/silent-server.js";
import { OUR_DRAFT_ARM, speculativeSuiteBehindProxy } from "./helpers/speculation-behind-proxy.js";
import { BENCH_BIN, temporaryDirectory, withoutForceColor } from "./helpers/workspace.js";

/**
 * Every place a suite kind waits on a server outside the leg's SUT is bounded by default
 * (docs/reliability.md#what-a-per-case-timeout-covers): a FAKE server that accepts and never answers
 * ends the run with exit 2 and an error naming the arm, the endpoint and the timeout — never a pass,
 * never a hang — and the abandoned request leaves no socket, child or timer behind.
 */

const workspace = temporaryDirectory("hang-audit");
const runs = join(workspace.path, "runs");
test.after(() => workspace.remove());

/** Only a guard against this test hanging (the bug under test), never a check of speed. */
const HANG_GUARD_MS = 60_000;

async function guarded<T>(what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} hung: still waiting after ${HANG_GUARD_MS / 1000} s`)), HANG_GUARD_MS); });
  try {
    return await Promise.race([work, guard]);
  } finally {
    clearTimeout(timer);
  }
}

function conformanceSuite(name: string, fields: Record<string, unknown>): string {
  const path = join(workspace.path, `${name}.json`);
  writeFileSync(path, JSON.stringify({ name, kind: "conformance", ...fields }));
  return path;
}

/** What this process holds open that would keep `bench run` alive: sockets and child processes (timers are counted by the caller). */
const liveHandles = () => process.getActiveResourcesInfo().filter((kind) => kind === "TCPSocketWrap" || kind === "ProcessWrap");

/** The unanswered requests whose connection the client still holds, once a close in flight has had a moment to land. */
async function stillHeld(server: { heldOpen: () => number }): Promise<number> {
  for (let i = 0; i < 100 && server.heldOpen() > 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  return server.heldOpen();
}

const onlyVerdict = (verdicts: readonly GateVerdict[]): GateVerdict => {
  assert.is(verdicts.length, 1, JSON.stringify(verdicts));
  return verdicts[0];
};

test("conformance: a server that stops answering one check is an error after the per-case timeout, its request let go, the later checks not asked", async () => {
  const server = await startSilentServer({ answersModels: true, silentPath: "/metrics" });
  try {
    const suite = conformanceSuite("wedged-metrics", { checks: ["metrics_prometheus", "usage"], arms: [{ label: "wedged", url: server.url, gate: "required" }], case_timeout_s: 2 });
    const timersBefore = process.getActiveResourcesInfo().filter((kind) => kind === "Timeout").length;
    const result = await guarded("bench run on a wedged /metrics", runInProcess(runs, "wedged-metrics", { suites: [suite] }));
    assert.is(result.code, 2, String(result.error));
    const verdict = onlyVerdict(result.verdicts);
    assert.is(verdict.status, "error");
    assert.is(verdict.status === "error" ? verdict.reason : "", `wedged: conformance check metrics_prometheus at ${server.url} did not answer within 2 s (per-case timeout, set by case_timeout_s in ${suite}: raise it there, it overrides --case-timeout SECONDS)`);
    // The check's one request was sent and abandoned; "usage" was never asked.
    assert.equal(server.unanswered(), ["GET /metrics"]);
    assert.is(await stillHeld(server), 0, "the abandoned /metrics request still holds its connection");
    assert.equal(liveHandles(), []);
    assert.is(process.getActiveResourcesInfo().filter((kind) => kind === "Timeout").length, timersBefore, "a timer of the abandoned check is still armed");
  } finally {
    await server.close();
  }
});

test("conformance: a stream that stops after its first event is an error after the per-case timeout, its connection let go", async () => {
  const server = await startSilentServer({ answersModels: true, silentPath: "/v1/chat/completions", halfStream: true });
  try {
    const suite = conformanceSuite("half-stream", { checks: ["sse_framing"], arms: [{ label: "half", url: server.url, gate: "required" }], case_timeout_s: 2 });
    const result = await guarded("bench run on a stream cut short", runInProcess(runs, "half-stream", { suites: [suite] }));
    assert.is(result.code, 2, String(result.error));
    const verdict = onlyVerdict(result.verdicts);
    assert.is(verdict.status === "error" ? verdict.reason : verdict.status, `half: conformance check sse_framing at ${server.url} did not answer within 2 s (per-case timeout, set by case_timeout_s in ${suite}: raise it there, it overrides --case-timeout SECONDS)`);
    assert.equal(server.unanswered(), ["POST /v1/chat/completions"]);
    assert.is(await stillHeld(server), 0, "the abandoned stream still holds its connection");
    assert.equal(liveHandles(), []);
  } finally {
    await server.close();
  }
});

test("an http arm whose server never answers the probes that open it fails to open after the boot timeout, naming arm, URL and boot_timeout_s", async () => {
  const server = await startSilentServer();
  try {
    const suite = conformanceSuite("wedged-open", { checks: ["usage"], arms: [{ label: "wedged", url: server.url, gate: "required" }] });
    const result = await guarded("bench run on a server that never answers /v1/models", runInProcess(runs, "wedged-open", { suites: [suite], box: { ...resolveBoxSettings(), bootTimeoutS: 2 } }));
    // The run stops with this error, as with any arm that cannot be opened (the CLI exits 2 on it: the next test).
    assert.instance(result.error, BenchError);
    assert.is((result.error as BenchError).oneLine(), `boot_timeout_s: arm "wedged": the server at ${server.url} did not answer the probes that open it within 2 s (fix: check that the server answers /v1/models, or raise --boot-timeout (boot_timeout_s in the box config))`);
    assert.equal(server.unanswered(), ["GET /v1/models"]);
    assert.is(await stillHeld(server), 0, "the abandoned probe still holds its connection");
    assert.equal(liveHandles(), []);
  } finally {
    await server.close();
  }
});

test("niah: an HTTP arm's server that stops answering mid-run is an error after the per-case timeout, the request abandoned with its connection", async () => {
  const model = await resolveModel("tiny-random:F32");
  // The test's own server, not one the run starts (a run must close every process it started).
  const upstream = await startBenchServe(runs, ["--model", model.path, "--unvalidated", "--slots", "1", "--queue", "1", "--context-size", "1024", "--threads", "1"]);
  await waitHealthy(upstream.url);
  const server = await startSilentServer({ upstream: upstream.url });
  try {
    const niah = JSON.parse(readFileSync(join(SUITES_DIR, "niah-quick.json"), "utf8")) as Record<string, unknown>;
    const suite = join(workspace.path, "wedged-niah.json");
    writeFileSync(suite, JSON.stringify({ ...niah, name: "wedged-niah", lengths: [200], case_timeout_s: 2, arms: [{ label: "wedged", model: "tiny-random:F32", sut: "http", url: server.url, gate: "required" }] }));
    // The arm opens through the real server; from its first case on the FAKE answers nothing.
    const openSut: OpenSut = async (arm, settings, context) => {
      const sut = await openArmSut(arm, settings, context);
      server.wedge();
      return sut;
    };
    const result = await guarded("bench run on a server wedged mid-run", runInProcess(runs, "wedged-niah", { suites: [suite], openSut }));
    assert.is(result.code, 2, String(result.error));
    const verdict = result.verdicts.find((v) => v.check === "niah");
    assert.is(verdict?.status, "error", JSON.stringify(result.verdicts));
    assert.match(verdict?.status === "error" ? verdict.reason : "", /^1 needle case\(s\) errored; the others did not run: wedged: tokenize did not answer within 2 s \(per-case timeout, set by case_timeout_s in \S+\/wedged-niah\.json: raise it there, it overrides --case-timeout SECONDS\)/);
    assert.is(server.unanswered().length, 1, server.unanswered().join(", "));
    assert.is(await stillHeld(server), 0, `the abandoned ${server.unanswered()[0]} still holds its connection`);
    // The test's own server is the one process left.
    assert.equal(liveHandles().filter((kind) => kind !== "ProcessWrap"), []);
  } finally {
    await server.close();
    upstream.child.kill("SIGTERM");
    await upstream.exited;
  }
});

test("speculative: a speculating server that stops answering its model list, or a timed greedy, is its arm's error after the per-case timeout, the request let go; the next arm still runs", async () => {
  // Our server with a draft model behind the FAKE proxy, twice (silent on /v1/models after the probes
  // that open the arm; holding a speculating answer), then the same server unproxied.
  const held = join(workspace.path, "held-open");
  mkdirSync(held);
  const suite = join(workspace.path, "wedged-speculation.json");
  writeFileSync(suite, JSON.stringify({ ...speculativeSuiteBehindProxy(["silent-models", "hang"], { heldOpenDirectory: held, keepOurArm: true }), name: "wedged-speculation", max_tokens: [16] }));
  // 5 s: a wedged request reaches it quickly, one T=16 answer (well under a second) never does.
  const result = await guarded("bench run on speculating servers wedged after their open", runInProcess(runs, "wedged-speculation", { suites: [suite], prompts: [0], caseTimeoutS: 5, shutdownGraceS: 1 }));
  assert.is(result.error, undefined, describeRun(result));
  assert.is(result.code, 2, describeRun(result));
  const note = `(per-case timeout: raise it with --case-timeout SECONDS or case_timeout_s in ${suite})`;
  const silent = onlyVerdict(result.verdicts.filter((v) => v.arm === "FAKE silent-models"));
  assert.is(silent.status, "error");
  assert.match(silent.status === "error" ? silent.reason : "", /^FAKE silent-models: http:\/\/127\.0\.0\.1:\d+\/v1\/models did not answer within 5 s /);
  assert.ok(silent.status === "error" && silent.reason.endsWith(` 5 s ${note}`), JSON.stringify(silent));
  const hang = onlyVerdict(result.verdicts.filter((v) => v.arm === "FAKE hang"));
  assert.is(hang.status === "error" ? hang.reason : hang.status, `prompt 0 (single, T=16): the speculating server gave no answer: FAKE hang: timed greedy did not answer within 5 s ${note}`);
  // The arm after the wedged ones ran its check to the end.
  assert.is(onlyVerdict(result.verdicts.filter((v) => v.arm === OUR_DRAFT_ARM)).status, "pass", describeRun(result));
  // Each proxy, when stopped, still held this many of the requests it left unanswered: the client had let none go.
  assert.is(readFileSync(join(held, "silent-models.held"), "utf8"), "0", "the abandoned /v1/models request still held its connection when the server was stopped");
  assert.is(readFileSync(join(held, "hang.held"), "utf8"), "0", "the abandoned timed greedy request still held its connection when the server was stopped");
  assert.equal(liveHandles(), []);
});

test("the FAKE speculation proxy, stopped, passes the stop to its server and exits only after it", async () => {
  // A server that takes half a second to stop, and says its pid first.
  const server = "process.on('SIGTERM', () => setTimeout(() => process.exit(0), 500)); setInterval(() => {}, 1000); console.error(process.pid);";
  const proxy = spawn(process.execPath, [join(import.meta.dirname, "helpers", "fake-speculation-proxy.js"), "--listen", "0", "--fault", "hang", "--", process.execPath, "-e", server], { stdio: ["ignore", "ignore", "pipe"] });
  const pid = await guarded("the FAKE proxy's server saying its pid", new Promise<number>((resolve) => proxy.stderr.once("data", (chunk: Buffer) => resolve(Number(chunk.toString().trim())))));
  const exited = new Promise((resolve) => proxy.once("exit", resolve));
  proxy.kill("SIGTERM");
  await guarded("the FAKE proxy's stop", exited);
  const alive = (() => { try { return process.kill(pid, 0); } catch { return false; } })();
  if (alive) process.kill(pid, "SIGKILL");
  assert.not.ok(alive, "the proxy exited while its server was still running");
});

test("our server wedged before it listens (no line, no exit) fails to open after the boot timeout, its process killed", async () => {
  const suite = conformanceSuite("wedged-start", { checks: ["usage"], arms: [{ label: "wedged", model: "tiny-random:F32", gate: "required" }] });
  // Only the `bench serve` this run starts inherits it: the FAKE holds that process before it reads its arguments.
  const nodeOptions = process.env.NODE_OPTIONS;
  process.env.NODE_OPTIONS = `${nodeOptions ?? ""} --import ${join(import.meta.dirname, "helpers", "never-starts.js")}`;
  try {
    const result = await guarded("bench run on a server that never listens", runInProcess(runs, "wedged-start", { suites: [suite], box: { ...resolveBoxSettings(), bootTimeoutS: 2 }, shutdownGraceS: 1 }));
    assert.instance(result.error, BenchError);
    assert.is((result.error as BenchError).oneLine(), 'boot_timeout_s: the server (bench serve) printed no "listening on" line within 2 s (fix: raise --boot-timeout (boot_timeout_s in the box config), or run `bench serve` by hand to see why)');
    assert.equal(liveHandles(), []);
  } finally {
    if (nodeOptions === undefined) delete process.env.NODE_OPTIONS;
    else process.env.NODE_OPTIONS = nodeOptions;
  }
});

test("a stop while our server is wedged before it listens, or while a runner has not written its hello, ends the open at once (not at the boot timeout), its process stopped", async () => {
  const wedgedServer = conformanceSuite("stopped-start", { checks: ["usage"], arms: [{ label: "wedged", model: "tiny-random:F32", gate: "required" }] });
  // The FAKE that holds a process before its first line: as a runner it never writes its hello.
  const neverStarts = join(import.meta.dirname, "helpers", "never-starts.js");
  const nodeOptions = process.env.NODE_OPTIONS;
  const stoppedRuns: { readonly runId: string; readonly options: Pick<RunOptions, "suites" | "runner" | "prompts"> }[] = [
    { runId: "stopped-start", options: { suites: [wedgedServer] } },
    { runId: "stopped-hello", options: { suites: ["parity16"], runner: [process.execPath, neverStarts], prompts: [0] } },
  ];
  for (const { runId, options } of stoppedRuns) {
    // Only the `bench serve` the first run starts inherits it.
    if (runId === "stopped-start") process.env.NODE_OPTIONS = `${nodeOptions ?? ""} --import ${neverStarts}`;
    const stop = new AbortController();
    // Once the process is up and waited on: a stop before the open started would not reach it.
    const stopWhenStarted = setInterval(() => { if (liveHandles().includes("ProcessWrap")) stop.abort(); }, 50);
    try {
      const began = Date.now();
      const result = await guarded(`${runId}: a stopped run`, runInProcess(runs, runId, { ...options, box: { ...resolveBoxSettings(), bootTimeoutS: 120 }, shutdownGraceS: 1, signal: stop.signal }));
      assert.ok(stop.signal.aborted, `${runId}: the run ended before it was stopped`);
      assert.ok(Date.now() - began < 20_000, `${runId}: the stop waited on the boot (${Date.now() - began} ms)`);
      // A stopped run is no error (the CLI records it as interrupted), and nothing was verdicted.
      assert.is(result.error, undefined, String(result.error));
      assert.equal(result.verdicts, []);
      assert.equal(liveHandles(), []);
    } finally {
      clearInterval(stopWhenStarted);
      if (nodeOptions === undefined) delete process.env.NODE_OPTIONS;
      else process.env.NODE_OPTIONS = nodeOptions;
    }
  }
});

test("bench run: a server command that listens and never answers /health ends with exit 2 after --boot-timeout, its process gone", async () => {
  const suite = conformanceSuite("wedged-boot", {
    checks: ["usage"], arms: [{ label: "wedged", model: "tiny-random:F32", command: [process.execPath, join(import.meta.dirname, "helpers", "silent-server.js"), "{port}"], gate: "required" }],
  });
  const run = spawnSync(process.execPath, [BENCH_BIN, "run", "--suite", suite, "--runs-dir", runs, "--boot-timeout", "2", "--shutdown-grace", "1"],
    { env: { ...withoutForceColor(process.env), NO_COLOR: "1", CI: "1" }, encoding: "utf8", timeout: HANG_GUARD_MS, killSignal: "SIGKILL" });
  // SIGKILL: a hung run would take a SIGTERM as the start of an orderly stop, and wait on.
  assert.is(run.signal, null, `bench run hung: killed by the test's guard after ${HANG_GUARD_MS / 1000} s`);
  assert.is(run.status, 2, run.stdout + run.stderr);
  assert.match(run.stdout + run.stderr, "did not become healthy within 2 s");
});

test.run();
