import { test } from "uvu";
import * as assert from "uvu/assert";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { pathToFileURL } from "node:url";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { startBench, temporaryDirectory, withoutForceColor } from "./helpers/workspace.js";
import { childPids, commandLineOf, stillRunning, waitFor } from "./helpers/processes.js";

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
  assert.match(stdout, /greedy_parity +required +ERROR +runner: greedy did not answer within 1 s \(per-case timeout\)/);
  const summary = summaryOf("hang-ladder");
  assert.is(summary.status, "complete");
  assert.is(summary.exit_code, 2);
  assert.not.ok(await stillRunning(pid), "the runner was killed, not orphaned");
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
