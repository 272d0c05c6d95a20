import { test } from "uvu";
import * as assert from "uvu/assert";
import type { Baseline, GatedMetrics } from "../harness/gates/baseline.js";
import { applyRatchets } from "../harness/gates/ratchets.js";
import { learnBand, speedRatios } from "../harness/gates/speed-bands.js";

// Pure tests of the speed gate's arithmetic; the CLI is exercised on real runs in report-gate.test.ts.
const HERE = "2 × AMD EPYC, 24 GiB, linux-x64";
const REFERENCE = "parity16/F32/tokens_per_second";
const SUT = "parity16/server F32/tokens_per_second";

/** A run's gated speeds: the reference arm and one SUT arm, at the given tok/s. */
function speeds(reference: number, sut: number, machine = HERE, suites = ["parity16"], jobs = 1): GatedMetrics {
  const perf = new Map([[REFERENCE, { value: reference, better: "higher" as const }], [SUT, { value: sut, better: "higher" as const }]]);
  return {
    parity: new Map(), needles: new Map(), kernels: new Map(), kernelRatios: new Map(), trace: new Map(), memory: new Map(), perf,
    speedRatios: speedRatios(perf, new Map([["parity16", REFERENCE]])), machine, jobs, scope: { suites, arms: [] },
  };
}

const baseline: Baseline = {
  schema_version: 1, name: "speed", from_run: "quiet-1", machine: HERE, jobs: 1, parity: {}, needles: {}, trace: {},
  perf: { [REFERENCE]: { target: 1000, tolerance: 0.2, learned_from: 3, spread: 0.05 }, [SUT]: { target: 500, tolerance: 0.2, learned_from: 3, spread: 0.05 } },
  speed_ratios: { [SUT]: { reference: REFERENCE, target: 0.5, tolerance: 0.2, learned_from: 3, spread: 0.05 } },
};

const byLevel = (metrics: GatedMetrics, b: Baseline = baseline) => {
  const findings = applyRatchets(metrics, b);
  return { findings, fails: findings.filter((f) => f.level === "fail").map((f) => f.key), warns: findings.filter((f) => f.level === "warn").map((f) => f.key) };
};

test("a band is learned from the spread of repeated runs: 3 × the largest distance from the median, within [10%, 90%]", () => {
  assert.equal(learnBand([100, 110, 90]), { target: 100, tolerance: 0.3, learned_from: 3, spread: 0.1 });
  assert.equal(learnBand([100, 101, 99, 100]), { target: 100, tolerance: 0.1, learned_from: 4, spread: 0.01 }, "a quiet machine still gets 10%");
  assert.equal(learnBand([100, 400, 50]), { target: 100, tolerance: 0.9, learned_from: 3, spread: 3 });
  assert.equal(learnBand([100, 120]), { target: 110, tolerance: 0.5, learned_from: 2 }, "two runs: no spread worth learning, the default");
});

test("a busy machine: everything 2.5× slower, the ratio holds — no failure; the reference's own speed is a warning", () => {
  const { fails, warns, findings } = byLevel(speeds(400, 200));
  assert.equal(fails, []);
  assert.equal(warns, [REFERENCE]);
  assert.match(findings.find((f) => f.key === SUT)!.message, /^× parity16\/F32\/tokens_per_second in this run: 0\.5 within \[0\.4, 0\.7\] \(absolute 200, not gated\)$/);
});

test("the SUT alone 40% slower under the same load fails, as a ratio", () => {
  const { fails, findings } = byLevel(speeds(1000, 300));
  assert.equal(fails, [SUT]);
  assert.match(findings.find((f) => f.key === SUT)!.message, /0\.3 is below the band: target 0\.5 − 20% = 0\.4/);
});

test("runs that scattered by more than ±30% learn no band: that speed is reported, not gated, and one warning says why", () => {
  const noisy: Baseline = {
    ...baseline,
    perf: { ...baseline.perf, [REFERENCE]: { ...baseline.perf[REFERENCE], tolerance: 0.9, spread: 0.8 } },
    speed_ratios: { [SUT]: { ...baseline.speed_ratios![SUT], tolerance: 0.9, spread: 2.2 } },
  };
  const { fails, warns, findings } = byLevel(speeds(50, 400), noisy);
  assert.equal(fails, []);
  assert.equal(warns, ["speed"]);
  assert.is(findings.find((f) => f.key === "speed")!.message, "2 of 2 speeds reported, not gated: the runs their bands were learned from spread by more than ±30% around the median on this machine");
  assert.match(findings.find((f) => f.key === SUT)!.message, /^× parity16\/F32\/tokens_per_second in this run: 8 \(target 0\.5; its runs spread ±220%\): reported, not gated$/);
});

test("another machine: speed reported, never gated, in one warning", () => {
  const { fails, warns, findings } = byLevel(speeds(100, 10, "16 × AMD EPYC 9654, 128 GiB, linux-x64"));
  assert.equal(fails, []);
  assert.equal(warns, ["speed"]);
  assert.match(findings.find((f) => f.key === SUT)!.message, /^10 \(baseline 500 on another machine\): reported, not gated$/);
  const unknown = byLevel(speeds(100, 10), { ...baseline, machine: undefined });
  assert.equal([unknown.fails, unknown.warns], [[], ["speed"]], "a baseline that does not name its machine gates no speed");
});

test("another --jobs: suites measured beside each other are not measured alone — speed reported, never gated, in one warning; a baseline that records no --jobs gates any", () => {
  const { fails, warns, findings } = byLevel(speeds(100, 10, HERE, ["parity16"], 2));
  assert.equal(fails, []);
  assert.equal(warns, ["speed"]);
  assert.is(findings.find((f) => f.key === "speed")!.message, "the baseline's speeds were measured at --jobs 1, this run at --jobs 2: speed reported, not gated");
  assert.match(findings.find((f) => f.key === SUT)!.message, /^10 \(baseline 500 at --jobs 1\): reported, not gated$/);
  assert.equal(byLevel({ ...speeds(100, 10), jobs: undefined }).warns, ["speed"], "a run that did not record its --jobs is not gated against one that did");
  assert.equal(byLevel(speeds(1000, 300, HERE, ["parity16"], 2), { ...baseline, jobs: undefined }).fails, [SUT], "an older baseline: gated as before");
});

test("a subset run: the baseline's entries outside its selection are named in one warning", () => {
  const wider: Baseline = { ...baseline, needles: { "niah/copy-4k": ["4000:0.5:0"] }, kernels: { "quant-kernels/reference plugin/matvec": ["M"] } };
  const { warns, findings } = byLevel(speeds(1000, 500), wider);
  assert.equal(warns, ["scope"]);
  assert.match(findings.find((f) => f.key === "scope")!.message, /^2 baseline entries outside this run's selection \(suites parity16\), not compared: niah\/copy-4k, quant-kernels\/reference plugin\/matvec$/);
});

test.run();
