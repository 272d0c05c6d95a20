import { test } from "uvu";
import * as assert from "uvu/assert";
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { resolveBoxSettings } from "../harness/box/config.js";
import { BenchError } from "../harness/errors.js";
import type { GateVerdict } from "../harness/results/types.js";
import { runInProcess } from "./helpers/in-process-run.js";
import { startSilentServer } from "./helpers/silent-server.js";
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
    assert.is(verdict.status === "error" ? verdict.reason : "", `wedged: conformance check metrics_prometheus at ${server.url} did not answer within 2 s (per-case timeout)`);
    // The check's one request was sent and abandoned; "usage" was never asked.
    assert.equal(server.unanswered(), ["GET /metrics"]);
    assert.is(await stillHeld(server), 0, "the abandoned /metrics request still holds its connection");
    assert.equal(liveHandles(), []);
    assert.is(process.getActiveResourcesInfo().filter((kind) => kind === "Timeout").length, timersBefore, "a timer of the abandoned check is still armed");
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

test("bench run: a server command that listens and never answers /health ends with exit 2 after --boot-timeout, its process gone", async () => {
  const suite = conformanceSuite("wedged-boot", {
    checks: ["usage"], arms: [{ label: "wedged", model: "tiny-random:F32", command: [process.execPath, join(import.meta.dirname, "helpers", "silent-server.js"), "{port}"], gate: "required" }],
  });
  const run = spawnSync(process.execPath, [BENCH_BIN, "run", "--suite", suite, "--runs-dir", runs, "--boot-timeout", "2", "--shutdown-grace", "1"],
    { env: { ...withoutForceColor(process.env), NO_COLOR: "1", CI: "1" }, encoding: "utf8", timeout: HANG_GUARD_MS });
  assert.is(run.signal, null, `bench run hung: killed by the test's guard after ${HANG_GUARD_MS / 1000} s`);
  assert.is(run.status, 2, run.stdout + run.stderr);
  assert.match(run.stdout + run.stderr, "did not become healthy within 2 s");
});

test.run();
