import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { resolveModel } from "../harness/fixtures/registry.js";
import { startManagedServer, stopManagedServer } from "../harness/sut/managed-server.js";
import { startBench, temporaryDirectory } from "./helpers/workspace.js";
import { stillRunning, waitFor } from "./helpers/processes.js";

/** User + system CPU seconds a process has used (/proc/<pid>/stat fields 14 and 15, in clock ticks of 1/100 s). */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

const work = temporaryDirectory("chaos");
test.after(() => work.remove());
const runs = join(work.path, "runs");

test("regression: a harness killed with kill -9 leaves no orphan: the idle, ready bench serve it started drains and exits (its stdin lifeline closes)", async () => {
  // The harness's own way of starting a server, in a process we can kill -9 once the server is ready and idle.
  const model = (await resolveModel("tiny-random:F32")).path;
  const parent = spawn(process.execPath, ["--input-type=module", "-e", `
    const { startManagedServer } = await import(${JSON.stringify(join(PACKAGE_ROOT, "dist", "harness", "sut", "managed-server.js"))});
    const server = await startManagedServer({ modelPath: ${JSON.stringify(model)}, slots: 1, queue: 1, contextSize: 128, threads: 1, flashAttention: false, bootTimeoutS: 120 });
    console.log("server " + server.child.pid);
    setInterval(() => undefined, 60_000);`], { stdio: ["ignore", "pipe", "inherit"] });
  const server = await new Promise<number>((resolve, reject) => {
    createInterface({ input: parent.stdout! }).on("line", (line) => { const pid = /^server (\d+)$/.exec(line)?.[1]; if (pid !== undefined) resolve(Number(pid)); });
    parent.once("exit", (code) => reject(new Error(`the parent exited ${code} before its server was ready`)));
  });
  parent.kill("SIGKILL");
  assert.not.ok(await stillRunning(server, 15_000), `bench serve (pid ${server}) outlived the harness that started it`);
});

test("regression: a server the harness asks to stop exits once it has drained, not held by its stdin lifeline until the CLI's 5 s last resort", async () => {
  const server = await startManagedServer({ modelPath: (await resolveModel("tiny-random:F32")).path, slots: 1, queue: 1, contextSize: 128, threads: 1, flashAttention: false, bootTimeoutS: 120 });
  let drainedAt: number | undefined;
  createInterface({ input: server.child.stdout! }).on("line", (line) => { if (line === "drained; bye") drainedAt = Date.now(); });
  await stopManagedServer(server);
  const exitedAt = Date.now();
  assert.ok(drainedAt !== undefined, "the server said it drained");
  // Measured from its own "drained" line, so a slow drain on a loaded machine does not count: only what holds the process after it.
  assert.ok(exitedAt - drainedAt! < 2500, `the server exited ${exitedAt - drainedAt!} ms after it drained`);
  assert.is(server.child.exitCode, 0);
});

test("regression: a SIGTERM while bench is still loading ends it with exit 2 and one line, not death by the signal", async () => {
  const run = startBench(["run", "--suite", "parity16", "--runs-dir", runs, "--run-id", "early"]);
  // Node's own bootstrap takes ~0.06 s of CPU and loading the CLI ~0.7 s: at 0.2 s of CPU (load-independent,
  // unlike wall time on a busy machine) bench is past bootstrap and still loading.
  await waitFor("bench to be loading", () => (cpuSeconds(run.child.pid!) >= 0.2 ? true : undefined), 60_000);
  run.child.kill("SIGTERM");
  const result = await run.result;
  assert.is(result.status, 2, result.stderr);
  assert.match(result.stderr, /^bench: (stopped by SIGTERM while starting|stopped by SIGTERM) \(exit 2\)$/m);
});

test.run();
