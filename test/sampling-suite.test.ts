/**
 * The sampling suite against planted sampler faults (server/faults.ts, FAKE `sample-*`) and
 * swapped declarations, in one real `bench run`: our server started once clean and once per fault
 * (the fault set in its environment), each arm drawing the settings of suites/sampling.json that
 * its fault changes (or the parameters it ignores). The run exits 1; the clean arm passes every check; each faulty arm fails the
 * check that owns its fault, naming the setting and the test statistic; and a server declared with
 * the other's convention fails the fit (llama-server's arm where it is built).
 */
import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { builtLlamaServer } from "../harness/sut/llama-server-binary.js";
import { loadSuite } from "../harness/suites/load.js";
import type { SamplingArm, SamplingSuite } from "../harness/suites/sampling-suite.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const shipped = loadSuite("sampling") as SamplingSuite;
const ours = shipped.arms.find((arm) => arm.label === "bench serve")!;
const theirs = shipped.arms.find((arm) => arm.label === "llama-server")!;

/** Settings of the shipped grid by what they are for (indices into suites/sampling.json's settings). */
const PLAIN = 0;
const NUCLEUS = 4;
const PARTING = 2;
const MIN_P = 5;
const NARROWEST = 8;
const TINY_TEMPERATURE = 9;

/** Each fault, the settings it is drawn at, and the check that must fail. */
const FAULTS: readonly { fault: string; settings: number[]; check: "sampling_fit" | "seeds" | "parameters"; parameters?: SamplingArm["parameters"] }[] = [
  { fault: "sample-temperature-twice", settings: [NUCLEUS], check: "sampling_fit" },
  { fault: "sample-top-p-one-short", settings: [PARTING], check: "sampling_fit" },
  { fault: "sample-top-p-one-extra", settings: [PARTING], check: "sampling_fit" },
  { fault: "sample-top-k-unstable-ties", settings: [NARROWEST], check: "sampling_fit" },
  { fault: "sample-min-p-wrong-max", settings: [MIN_P], check: "sampling_fit" },
  { fault: "sample-llama-order", settings: [PARTING], check: "sampling_fit" },
  { fault: "sample-unseeded", settings: [PLAIN], check: "seeds" },
  { fault: "sample-params-ignored", settings: [PLAIN], check: "parameters", parameters: ["logit_bias", "frequency_penalty", "min_p"] },
  { fault: "sample-small-temperature-underflow", settings: [TINY_TEMPERATURE], check: "sampling_fit" },
];

const arm = (base: SamplingArm, extra: Partial<SamplingArm>): SamplingArm => ({ ...base, parameters: ["min_p"], ...extra });

test("every planted sampler fault makes the run exit 1 naming the setting and the statistic; the clean server passes; each server declared with the other's convention fails", () => {
  const directory = temporaryDirectory("sampling-faults");
  try {
    const withLlamaServer = builtLlamaServer() !== undefined;
    const arms: SamplingArm[] = [
      arm(ours, { label: "clean", settings: [PARTING, NUCLEUS, MIN_P, NARROWEST, TINY_TEMPERATURE] }),
      ...FAULTS.map(({ fault, settings, parameters }) => arm(ours, { label: fault, settings, command: ["env", `BENCH_SERVER_FAULT=${fault}`, ...ours.command], ...(parameters === undefined ? {} : { parameters }) })),
      arm(ours, { label: "ours declared llama.cpp", convention: "llama.cpp", settings: [PARTING] }),
      ...(withLlamaServer ? [arm(theirs, { label: "llama-server declared openai", convention: "openai", settings: [PARTING] })] : []),
    ];
    const { path: _path, ...suite } = { ...shipped, name: "sampling-faults", prompts: [{ ...shipped.prompts[0], draws: 300 }], arms };
    const path = join(directory.path, "sampling-faults.json");
    writeFileSync(path, JSON.stringify(suite));
    const result = bench(["run", "--suite", path, "--runs-dir", directory.path, "--run-id", "faults"]);
    assert.is(result.status, 1, result.stdout + result.stderr);
    const verdicts = (JSON.parse(readFileSync(join(directory.path, "faults", "summary.json"), "utf8")) as { verdicts: { arm: string; check: string; status: string; summary?: string; reason?: string }[] }).verdicts;
    const verdict = (label: string, check: string) => verdicts.find((v) => v.arm === label && v.check === check);
    for (const check of ["sampling_fit", "seeds", "parameters"]) assert.is(verdict("clean", check)?.status, "pass", JSON.stringify(verdict("clean", check)));
    for (const { fault, check } of FAULTS) {
      const failed = verdict(fault, check);
      assert.is(failed?.status, "fail", `${fault}: ${JSON.stringify(failed)}`);
      if (check === "sampling_fit") assert.match(failed!.summary!, /temperature [\d.]+, top_k \d+, top_p [\d.]+, min_p [\d.]+.*(G = [\d.]+ on \d+ df.*p = |G = ∞, p = 0)/, fault);
      else if (check === "seeds") assert.match(failed!.summary!, /alone/, fault);
      else assert.match(failed!.summary!, /^FAIL: logit_bias, frequency_penalty, min_p accepted without their effect/, fault);
    }
    const declared = ["ours declared llama.cpp", ...(withLlamaServer ? ["llama-server declared openai"] : [])];
    for (const label of declared) assert.match(verdict(label, "sampling_fit")?.summary ?? "", /^FAIL: .*temperature 1.5, top_k 0, top_p 0.85/, label);
    // The statistic is in the line a reader sees first too.
    assert.match(result.stdout, /sample-top-p-one-short +sampling_fit +required +FAIL/);
  } finally {
    directory.remove();
  }
});

test("a setting index that names no setting is refused before any server starts: exit 2, one line naming the file, the field and the fix", () => {
  const directory = temporaryDirectory("sampling-bad");
  try {
    const { path: _path, ...suite } = { ...shipped, name: "sampling-bad", arms: [{ ...ours, settings: [0, 99] }] };
    const path = join(directory.path, "sampling-bad.json");
    writeFileSync(path, JSON.stringify(suite));
    const result = bench(["run", "--suite", path, "--runs-dir", directory.path]);
    assert.is(result.status, 2, result.stdout + result.stderr);
    assert.ok(result.stderr.includes(`${path}: arms.0.settings: setting index 99 names no setting (there are ${shipped.settings.length}) (fix: use indices from 0 to ${shipped.settings.length - 1})`), result.stderr);
  } finally {
    directory.remove();
  }
});

test.run();
