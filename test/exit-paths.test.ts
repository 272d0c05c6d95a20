import { test } from "uvu";
import * as assert from "uvu/assert";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { pathToFileURL } from "node:url";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { bench, startBench, temporaryDirectory, withoutForceColor } from "./helpers/workspace.js";
import { childPids, commandLineOf, stillRunning, waitFor } from "./helpers/processes.js";
import { startSilentServer } from "./helpers/silent-server.js";

// Every way out of `bench run` ends in harness/cli/exit-code.ts: a run that did not finish is
// never exit 0, and its summary.json never stays "running".
const work = temporaryDirectory("exit-paths");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const summaryOf = (runId: string) => JSON.parse(readFileSync(join(runs, runId, "summary.json"), "utf8"));

test("kill -9 of the bench serve child mid-arm: its checks ERROR, the later arm still runs, exit 2, summary.json complete", async () => {
  const { child, result } = startBench(["run", "--suite", "parity16", "--arm", "server F32", "--arm", "Q8_0", "--runs-dir", runs, "--run-id", "server-killed"]);
  const cells = join(runs, "server-killed", "cells.jsonl");
  // The first cell of the server arm: the server has booted and answered, the arm is under way.
  await waitFor("the server arm's first cell", () => (existsSync(cells) && readFileSync(cells, "utf8").includes('"arm":"server F32"') ? true : undefined));
  const server = childPids(child.pid!).find((pid) => commandLineOf(pid).includes(" serve "));
  assert.ok(server !== undefined, "bench run started bench serve");
  process.kill(server, "SIGKILL");
  const { status, stdout, stderr } = await result;
  assert.is(status, 2, stdout + stderr);
  const summary = summaryOf("server-killed");
  assert.is(summary.status, "complete");
  assert.is(summary.exit_code, 2);
  const serverVerdicts = summary.verdicts.filter((v: { arm: string }) => v.arm === "server F32");
  assert.ok(serverVerdicts.some((v: { gate: string; status: string }) => v.gate === "required" && v.status === "error"), JSON.stringify(serverVerdicts));
  assert.ok(summary.verdicts.some((v: { arm: string; status: string }) => v.arm === "Q8_0" && v.status === "pass"), "the arm after the dead server still ran");
  assert.match(stdout, /^ERROR \(exit 2\)/m);
});

test("a server that dies of SIGSEGV after its arm's last answer, at teardown (FAKE crash-at-shutdown): exit 2, summary.json names the signal and the server's last stderr", () => {
  const result = bench(["run", "--suite", "parity16", "--arm", "server F32", "--prompt", "4", "--prompt", "5", "--runs-dir", runs, "--run-id", "crash-at-shutdown"], { BENCH_SERVER_FAULT: "crash-at-shutdown" });
  assert.is(result.status, 2, result.stdout + result.stderr);
  const summary = summaryOf("crash-at-shutdown");
  assert.equal([summary.status, summary.exit_code], ["complete", 2]);
  const [crash, ...others] = [...summary.verdicts].sort((a: { check: string }, b: { check: string }) => Number(b.check === "arm") - Number(a.check === "arm"));
  assert.ok(others.length > 0 && others.every((v: { status: string }) => v.status === "pass"), "every check was answered and passed before the crash");
  assert.equal([crash.check, crash.gate, crash.status], ["arm", "required", "error"]);
  assert.match(crash.reason, /^bench serve died of SIGSEGV, a signal the harness did not send: a crash fails the arm even after its last answer; its stderr ended: .*warning: PLANTED FAULT crash-at-shutdown \(BENCH_SERVER_FAULT\): this server is deliberately broken, for tests \(the rest: legs\/01-parity16-server-f32\.stderr\.log\)$/);
  assert.match(result.stdout, /^parity16 +server F32 +arm +required +ERROR +bench serve died of SIGSEGV, a signal the harness did not send/m);
  assert.equal(summary.legs[0].processes.map((p: { signal: string; forced: boolean }) => [p.signal, p.forced]), [["SIGSEGV", false]]);
  assert.equal(summary.legs[0].evidence.map((e: { kind: string; fields: Record<string, unknown> }) => [e.kind, e.fields.signal, e.fields.by]), [["killed_by_signal", "SIGSEGV", "other"]]);
});

const hangingRunner = (runId: string, caseTimeoutS: number, graceS: number) => {
  const pidFile = join(work.path, `${runId}.pid`);
  const started = startBench(["run", "--suite", "parity16", "--runner", "python3 {bench}/test/helpers/fake_runner.py hang {model}", "--prompt", "4",
    "--case-timeout", String(caseTimeoutS), "--shutdown-grace", String(graceS), "--runs-dir", runs, "--run-id", runId], { FAKE_RUNNER_PID_FILE: pidFile });
  const runnerPid = () => waitFor("the FAKE runner to hang", () => (existsSync(pidFile) && readFileSync(pidFile, "utf8") !== "" ? Number(readFileSync(pidFile, "utf8")) : undefined));
  return { ...started, runnerPid };
};

test("a runner that hangs (and ignores SIGTERM): verdicts written, then the shutdown ladder ends it; exit 2, no orphan", async () => {
  const began = Date.now();
  const { result, runnerPid } = hangingRunner("hang-ladder", 1, 1);
  const pid = await runnerPid();
  const { status, stdout, stderr } = await result;
  assert.is(status, 2, stdout + stderr);
  assert.ok(Date.now() - began < 60_000, "bounded: case timeouts, then shutdown request, 1 s grace, SIGTERM, 1 s, SIGKILL");
  assert.match(stdout, /greedy_parity +required +ERROR +1 prompt\(s\) errored \(prompt 4: runner: greedy timed out after 1 s; the runner was stopped, a fresh runner takes the next case \(per-case timeout: raise it with --case-timeout SECONDS or case_timeout_s in \S+\/parity16\.json\)\)/);
  const summary = summaryOf("hang-ladder");
  assert.is(summary.status, "complete");
  assert.is(summary.exit_code, 2);
  assert.not.ok(await stillRunning(pid), "the runner was killed, not orphaned");
});

test("a runner that hangs on one prompt is stopped, the box reset and a fresh runner started: the other prompts get real verdicts; after 2 restarts the rest of the arm is ERROR, not run; exit 2, no orphan", async () => {
  const pidFile = join(work.path, "hang-on-prompt.pids");
  const resetLog = join(work.path, "hang-on-prompt.resets");
  const config = join(work.path, "hang-on-prompt.config.json");
  writeFileSync(config, JSON.stringify({ reset: { command: ["sh", "-c", `echo reset >> ${resetLog}`], timeout_s: 30 } }));
  const { status, stdout, stderr } = await startBench(["run", "--suite", "parity16", "--runner", "python3 {bench}/test/helpers/fake_runner.py hang-on-prompt:1 {model}",
    "--prompt", "0", "--prompt", "1", "--prompt", "2", "--case-timeout", "4", "--shutdown-grace", "1", "--config", config, "--runs-dir", runs, "--run-id", "hang-on-prompt"], { FAKE_RUNNER_PID_FILE: pidFile }).result;
  assert.is(status, 2, stdout + stderr);
  const summary = summaryOf("hang-on-prompt");
  const verdict = (check: string) => summary.verdicts.find((v: { check: string }) => v.check === check);
  // The batch of three hung: the runner was replaced and the prompts asked alone; prompt 1 hung again, the others were answered.
  assert.is(verdict("greedy_parity").status, "error");
  assert.match(verdict("greedy_parity").reason, /^1 prompt\(s\) errored \(prompt 1: runner: greedy timed out after 4 s; the runner was stopped, a fresh runner takes the next case \(per-case timeout: raise it with --case-timeout SECONDS or case_timeout_s in \S+\/parity16\.json\)\)/);
  const cells = readFileSync(join(runs, "hang-on-prompt", "cells.jsonl"), "utf8").trim().split("\n").map((line) => JSON.parse(line)).filter((c) => c.check === "greedy_parity");
  assert.equal(cells.filter((c) => c.status === "error").map((c) => [c.prompt, c.reproduce.endsWith("--prompt 1")]), [[1, true]]);
  assert.equal(cells.filter((c) => c.status === "pass").map((c) => c.prompt), [...Array(16).fill(0), ...Array(16).fill(2)], "real verdicts for the prompts that were answered: 16 positions each");
  assert.is(verdict("teacher_forced").status, "pass", "checks after the timeout ran on the fresh runner");
  assert.is(verdict("distribution").status, "pass");
  for (const check of ["determinism", "batch_invariance"]) {
    assert.is(verdict(check).status, "error");
    assert.match(verdict(check).reason, /^not run: runner restarted 2 times \(the limit per arm\), and the last one's greedy timed out after 4 s/);
  }
  const [leg] = summary.legs;
  assert.is(leg.runner_restarts, 2);
  assert.equal(leg.resets.map((r: { when: string }) => r.when), ["before", "restart", "restart", "after"]);
  assert.is(readFileSync(resetLog, "utf8"), "reset\n".repeat(4));
  assert.is(leg.evidence.filter((e: { kind: string }) => e.kind === "runner_restarted").length, 2);
  assert.match(stdout, /^parity16 \/ runner: runner restarted \(2 of 2\) after greedy timed out after 4 s \(per-case timeout\)/m);
  assert.match(stdout, /^parity16 \/ runner: reset between runners: sh -c echo reset/m);
  const pids = readFileSync(pidFile, "utf8").trim().split("\n").map(Number);
  assert.is(pids.length, 3, "the first runner and two fresh ones");
  for (const pid of pids) assert.not.ok(await stillRunning(pid), `runner ${pid} was stopped, not orphaned`);
  const report = bench(["report", "hang-on-prompt", "--runs-dir", runs]);
  assert.is(report.status, 0, report.stderr);
  assert.match(report.stdout, /^- parity16 \/ runner: runner restarted \(1 of 2\) after greedy timed out after 4 s/m);
});

test("the first SIGINT stops in order (summary.json interrupted, exit 2); no orphan", async () => {
  const { child, result, runnerPid } = hangingRunner("hang-sigint", 600, 1);
  const pid = await runnerPid();
  child.kill("SIGINT");
  const { status, stdout, stderr } = await result;
  assert.is(status, 2, stdout + stderr);
  assert.match(stderr, /SIGINT: stopping in order/);
  const summary = summaryOf("hang-sigint");
  assert.is(summary.status, "interrupted");
  assert.is(summary.exit_code, 2);
  assert.is(summary.error, "stopped by SIGINT");
  assert.ok(summary.verdicts.some((v: { check: string; status: string }) => v.check === "tokenizer" && v.status === "pass"), "finished verdicts are kept");
  assert.not.ok(await stillRunning(pid), "the runner was killed, not orphaned");
});

test("a second SIGINT stops at once: summary.json interrupted with that reason, exit 2; no orphan", async () => {
  const { child, result, runnerPid } = hangingRunner("hang-sigint-twice", 600, 300);
  const pid = await runnerPid();
  let said = "";
  child.stderr!.on("data", (chunk) => { said += chunk; });
  child.kill("SIGINT");
  // The second only once the first was taken: two SIGINTs pending at once (a descheduled process on a loaded box) merge into one.
  await waitFor("bench to take the first SIGINT", () => (said.includes("SIGINT: stopping in order") ? true : undefined));
  child.kill("SIGINT");
  const { status, stdout, stderr } = await result;
  assert.is(status, 2, stdout + stderr);
  const summary = summaryOf("hang-sigint-twice");
  assert.is(summary.status, "interrupted");
  assert.match(summary.error, /^SIGINT again: stopped at once/);
  assert.not.ok(await stillRunning(pid), "the runner was killed, not orphaned");
});

/** A conformance suite with one required arm (`arm` gives where its server comes from). */
function conformanceSuite(name: string, arm: Record<string, unknown>): string {
  const path = join(work.path, `${name}.json`);
  writeFileSync(path, JSON.stringify({ name, kind: "conformance", checks: ["usage"], arms: [{ label: "wedged", gate: "required", ...arm }] }));
  return path;
}

/** Only a guard against the bug under test (a boot waited on to its timeout), never a check of speed: the boot timeout is 120 s. */
const STOP_GUARD_MS = 20_000;

/** `bench run --boot-timeout 120` on `suite`, SIGINT once `booting()` says the arm is waiting on its server; what it printed, and how long it took to exit after the signal. */
async function interruptBoot(runId: string, suite: string, booting: (benchPid: number) => true | undefined) {
  const { child, result } = startBench(["run", "--suite", suite, "--boot-timeout", "120", "--shutdown-grace", "1", "--runs-dir", runs, "--run-id", runId]);
  const guard = setTimeout(() => child.kill("SIGKILL"), STOP_GUARD_MS * 2);
  try {
    await waitFor("the arm to start booting", () => booting(child.pid!), STOP_GUARD_MS);
    const signalled = Date.now();
    child.kill("SIGINT");
    const ended = await result;
    return { ...ended, afterSignalMs: Date.now() - signalled };
  } finally {
    clearTimeout(guard);
  }
}

function assertInterrupted(runId: string, run: { status: number | null; stdout: string; stderr: string; afterSignalMs: number }): void {
  assert.ok(run.afterSignalMs < STOP_GUARD_MS, `bench run took ${run.afterSignalMs} ms to stop after SIGINT: ${run.stdout}${run.stderr}`);
  assert.is(run.status, 2, run.stdout + run.stderr);
  assert.match(run.stderr, /SIGINT: stopping in order/);
  assert.match(run.stdout, /^interrupted \(stopped by SIGINT\): kept 0 finished gate verdicts in /m);
  const summary = summaryOf(runId);
  assert.is(summary.status, "interrupted");
  assert.is(summary.exit_code, 2);
  assert.is(summary.error, "stopped by SIGINT");
}

test("the first SIGINT while a server command boots (its /health never answers) stops the run at once: interrupted, exit 2, the server stopped", async () => {
  const suite = conformanceSuite("boot-sigint", { model: "tiny-random:F32", command: [process.execPath, join(import.meta.dirname, "helpers", "silent-server.js"), "{port}"] });
  let server: number | undefined;
  const run = await interruptBoot("boot-sigint", suite, (pid) => {
    server = childPids(pid).find((child) => commandLineOf(child).includes("silent-server.js"));
    return server === undefined ? undefined : true;
  });
  assertInterrupted("boot-sigint", run);
  assert.not.ok(await stillRunning(server!), "the booting server was stopped, not orphaned");
});

test("the first SIGINT while the probes that open an HTTP arm wait on a server that never answers them stops the run at once: interrupted, exit 2", async () => {
  const server = await startSilentServer();
  try {
    const suite = conformanceSuite("probe-sigint", { url: server.url });
    const run = await interruptBoot("probe-sigint", suite, () => (server.unanswered().length > 0 ? true : undefined));
    assertInterrupted("probe-sigint", run);
    assert.equal(server.unanswered(), ["GET /v1/models"]);
  } finally {
    await server.close();
  }
});

test("a command awaiting a promise that can never settle (the event loop empties): exit 2, summary.json error with the reason", () => {
  const script = join(work.path, "stall.mjs");
  const module = (path: string) => JSON.stringify(pathToFileURL(join(PACKAGE_ROOT, "dist", path)).href);
  writeFileSync(script, [
    `import { guardRun, runToEnd, setExitCode } from ${module("harness/cli/exit-code.js")};`,
    `import { RunDirectory } from ${module("harness/results/run-directory.js")};`,
    `await runToEnd(async () => {`,
    `  const recorder = new RunDirectory("stalled", ${JSON.stringify(runs)}, ["run"]);`,
    `  await recorder.open();`,
    `  guardRun({ stop: () => undefined, finalise: (status, reason) => recorder.flush(status, 2, reason), finaliseNow: (status, reason) => recorder.finaliseNow(status, reason) });`,
    `  setExitCode(0);`,
    // What a dead child's 'exit' listener registered too late looks like: nothing left can resolve it.
    `  await new Promise(() => undefined);`,
    `});`,
  ].join("\n"));
  const result = spawnSync(process.execPath, [script], { env: withoutForceColor(process.env), encoding: "utf8" });
  assert.is(result.status, 2, result.stdout + result.stderr);
  assert.match(result.stderr, /the run stopped making progress/);
  const summary = summaryOf("stalled");
  assert.is(summary.status, "error");
  assert.is(summary.exit_code, 2);
  assert.match(summary.error, /stopped making progress/);
});

test.run();
