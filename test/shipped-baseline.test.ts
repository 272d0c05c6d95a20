import { test } from "uvu";
import * as assert from "uvu/assert";
import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readBaseline } from "../harness/gates/baseline.js";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { encodeCellsArrow } from "../harness/results/cells-arrow.js";
import { readRun } from "../harness/results/read-run.js";
import { buildFakePlugin } from "./helpers/fake-plugin.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

// The committed baseline of the embedded default: taken from a passing default run, it must hold
// every kind of entry that run produces, or `bench gate --strict` cannot ratchet what it lacks.
const work = temporaryDirectory("shipped-baseline");
test.after(() => work.remove());
const SHIPPED = join(PACKAGE_ROOT, "reports", "baselines", "embedded-default.json");
/** A bounded matvec case of owned-kernels (the default battery's kernel suite), as the baseline names it. */
const Q8_0_MATVEC = "MATVEC(encoding=Q8_0:F32,rows=64,cols=1024,seed=112)";

test("the shipped baseline was taken from a passing run and holds parity, needles, kernel cases, each bounded kernel case's ratio and each arm's memory by group", () => {
  const baseline = readBaseline(SHIPPED);
  assert.is(baseline.accepted_failing, undefined);
  for (const kind of ["parity", "needles", "kernels", "kernel_ratios", "perf", "memory"] as const) {
    assert.ok(Object.keys(baseline[kind] ?? {}).length > 0, `no ${kind} entries`);
  }
  // Every matvec case (bounded, unlike the bit-exact decodes) has its ratio, so a kernel drifting inside its bound is caught.
  const matvec = Object.entries(baseline.kernels ?? {}).filter(([key]) => key.endsWith("/matvec"));
  assert.ok(matvec.length > 0);
  for (const [key, cases] of matvec) {
    for (const name of cases) assert.ok(baseline.kernel_ratios?.[`${key}/${name}`] !== undefined, `${key}/${name} has no kernel_ratios entry`);
  }
});

test("against the shipped baseline: the FAKE fp16-accumulating kernel fails; a ratio grown inside its bound fails the ratchet", () => {
  const runs = join(work.path, "runs");
  const suiteWithPlugin = (file: string, plugin: string) => {
    const suite = JSON.parse(readFileSync(join(PACKAGE_ROOT, "kernels", "owned-kernels.json"), "utf8"));
    delete suite.$schema;
    suite.arms = [{ label: "reference plugin", plugin, gate: "required" }];
    writeFileSync(join(work.path, file), JSON.stringify(suite));
    return join(work.path, file);
  };
  // The reference plugin's own arm label, so the shipped baseline's keys apply.
  const broken = bench(["run", "--suite", suiteWithPlugin("half-accum.json", buildFakePlugin(work.path, "HALF_ACCUM")), "--runs-dir", runs, "--run-id", "half-accum"]);
  assert.is(broken.status, 1, broken.stdout + broken.stderr);
  const brokenGate = bench(["gate", "half-accum", "--runs-dir", runs, "--baseline", SHIPPED, "--strict"]);
  assert.is(brokenGate.status, 1, brokenGate.stdout);
  assert.match(brokenGate.stdout, /^FAIL {2}owned-kernels\/reference plugin\/matvec: kernel cases no longer pass: .*MATVEC\(encoding=Q8_0:F32,rows=64,cols=1024,seed=112\)/m);
  // A kernel drifting inside its bound: FAKE injection of the ratio into a copy of a real reference-plugin run.
  const clean = bench(["run", "--suite", "owned-kernels", "--runs-dir", runs, "--run-id", "clean"]);
  assert.is(clean.status, 0, clean.stdout + clean.stderr);
  assert.is(bench(["gate", "clean", "--runs-dir", runs, "--baseline", SHIPPED]).status, 0);
  const grown = join(runs, "grown");
  cpSync(join(runs, "clean"), grown, { recursive: true });
  writeFileSync(join(grown, "cells.arrow"), encodeCellsArrow(readRun(grown).cells.map((c) => (c.check === "matvec" && c.detail.startsWith(`${Q8_0_MATVEC}:`) ? { ...c, kernel_ratio: 0.388 } : c))));
  const drifted = bench(["gate", "grown", "--runs-dir", runs, "--baseline", SHIPPED]);
  assert.is(drifted.status, 1, drifted.stdout);
  assert.match(drifted.stdout, /^FAIL {2}owned-kernels\/reference plugin\/matvec\/MATVEC\(encoding=Q8_0:F32,rows=64,cols=1024,seed=112\): worst ratio to its bound grew [\d.e-]+% → 38\.8% /m);
  assert.is(drifted.stdout.match(/^FAIL {2}/gm)?.length, 1, `the ratio is the only failure (the rest of the battery is missing: warnings): ${drifted.stdout}`);
});

test.run();
