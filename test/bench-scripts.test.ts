import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadSuite } from "../harness/suites/load.js";
import { armsBySut, batteryTask, describeRatios, sideBySide } from "../scripts/side-by-side.js";
import { describeSpread, quietRound } from "../scripts/quiet-rounds.js";
import { spawnSync } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("bench-scripts");
test.after(() => work.remove());

test("the benchmarks split every arm of their suites into embedded and server rows, none lost or doubled", () => {
  for (const name of ["parity16", "niah"]) {
    const suite = loadSuite(name) as { arms: readonly { label: string; sut?: string }[] };
    const { embedded, server } = armsBySut(suite.arms);
    assert.equal([...embedded, ...server].map((a) => a.label).sort(), suite.arms.map((a) => a.label).sort(), name);
    assert.ok(server.length > 0 && server.every((a) => a.sut === "http"), `${name} has a server arm, benchmarked on its own row`);
    assert.ok(embedded.length > 0 && embedded.every((a) => a.sut === undefined || a.sut === "llamacpp"), name);
  }
});

test("the harness side of a benchmark runs exactly the arms the raw side stands in for", async () => {
  await batteryTask("parity16", ["F32"], work.path)();
  const summary = JSON.parse(readFileSync(join(work.path, "run-0", "summary.json"), "utf8"));
  assert.equal(summary.suts.map((s: { arm: string }) => s.arm), ["F32"]);
  assert.equal([...new Set(summary.verdicts.map((v: { arm: string }) => v.arm))], ["F32"]);
  // Finalised like a CLI run, not left "running".
  assert.is(summary.status, "complete");
  assert.is(summary.exit_code, 0);
});

/** Burns `ms` of CPU time (not wall time: a loaded machine would stretch a wall-clock spin) in this process. */
function burnCpu(ms: number): void {
  const start = process.cpuUsage();
  while ((process.cpuUsage(start).user + process.cpuUsage(start).system) / 1000 < ms);
}

test("side by side counts each side's CPU time, that of the processes it starts included, beside its wall time", async () => {
  const child = `const s = process.cpuUsage(); while ((process.cpuUsage(s).user + process.cpuUsage(s).system) / 1000 < 400);`;
  const result = await sideBySide(
    { name: "in-process", run: async () => burnCpu(400) },
    { name: "in a child", run: async () => { spawnSync(process.execPath, ["-e", child]); } },
    { iterations: 1 },
  );
  assert.ok(result.harnessCpuMs >= 380 && result.harnessCpuMs < 600, `in-process CPU ${result.harnessCpuMs} ms`);
  assert.ok(result.rawCpuMs >= 380 && result.rawCpuMs < 900, `a child's CPU is counted: ${result.rawCpuMs} ms`);
  assert.ok(result.harnessMs >= 380, `wall ${result.harnessMs} ms`);
  assert.match(describeRatios(result, 1.1), /^wall harness\/raw \d\.\d{3}, CPU harness\/raw \d\.\d{3} \(target ≤ 1\.10: (OK|OVER TARGET)\)$/);
  assert.match(describeRatios({ ...result, ratio: 1.05, cpuRatio: 1.2 }, 1.1), /OVER TARGET/, "a CPU ratio over the target fails it even where the wall ratio does not");
});

test("a side's spread over its rounds: median, range, and half the range over the median", () => {
  assert.is(describeSpread([431, 398, 412]), "median 412 (spread 398–431, ±4.0%)");
  assert.is(describeSpread([0.5, 0.5], 2), "median 0.50 (spread 0.50–0.50, ±0.0%)");
});

test("a round during which a process outside the benchmark's own tree kept a core busy is measured again", async () => {
  // The shell exits at once and its spinning child is re-parented away from us: foreign work, as another user's job is.
  spawnSync("sh", ["-c", `${JSON.stringify(process.execPath)} -e "const end = Date.now() + 1500; while (Date.now() < end);" >/dev/null 2>&1 &`]);
  const busy: number[] = [];
  let rounds = 0;
  const measured = await quietRound(async () => { rounds++; await sleep(1000); return rounds; }, (foreignCores) => busy.push(foreignCores));
  assert.ok(busy.length >= 1 && busy[0] >= 0.5, `the first round saw the spinning process: ${busy.join(", ")} cores`);
  assert.is(measured.attempts, 2, "measured again once (BENCH_BUSY_ATTEMPTS default 2)");
  assert.is(rounds, 2);
});

test.run();
