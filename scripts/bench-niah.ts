/**
 * npm run bench:niah — wall time of the needle suite through the harness (haystack building with
 * the SUT's tokenizer, greedy decode, scoring, result files) against raw node-llama-cpp decoding
 * the same prompts, measured side by side in alternating rounds (side-by-side.ts). Each arm is its own row: the
 * embedded arm against raw greedy on its cases, and the server arm (our server, own process, HTTP)
 * against the same raw greedy — that row's difference includes the server's boot and transport.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolveModel } from "../harness/fixtures/registry.js";
import { armSettings } from "../harness/runner/open-sut.js";
import { needleCases } from "../harness/runner/niah-runner.js";
import { loadSuite } from "../harness/suites/load.js";
import { resolveNiahSuite, type NiahSuite } from "../harness/suites/niah-suite.js";
import { needlePrompts } from "./needle-prompts.js";
import { openRaw } from "./raw-llamacpp.js";
import { armsBySut, batteryTask, describeRatios, sideBySide } from "./side-by-side.js";

/** Harness/raw the embedded needle arm may take (issue #30). */
const EMBEDDED_TARGET = 1.05;

const suite = loadSuite("niah") as NiahSuite;
const spec = resolveNiahSuite(suite);
/** BENCH_NIAH_CASES=4000:0.5:0,… runs only those cases (as `bench run --niah-case`) on both sides: one case is a quicker figure on a loaded machine. */
const onlyCases = process.env.BENCH_NIAH_CASES?.split(",").filter((c) => c !== "");
const cases = needleCases(spec, onlyCases);
if (cases.length === 0) throw new Error(`BENCH_NIAH_CASES=${process.env.BENCH_NIAH_CASES} names no case of the niah suite (L:depth:trial, e.g. 4000:0.5:0)`);
const groups = armsBySut(suite.arms);
const arms = [...groups.embedded, ...groups.server];
if (arms.length < suite.arms.length) console.log(`${suite.arms.length - arms.length} arm(s) that are neither embedded nor our server (runners) are not benchmarked here`);
const scratch = mkdtempSync(join(tmpdir(), "bench-niah-"));

const lines: string[] = [];
for (const arm of arms) {
  const settings = armSettings(arm, {}, 1);
  const model = await resolveModel(arm.model);
  // The raw side gets the exact prompts the harness builds, prepared once outside the timing.
  const prompts = await needlePrompts(spec, arm.model, settings);
  const kind = arm.sut === "http" ? "server" : "embedded";
  const what = `arm "${arm.label}" (${kind}): ${cases.length} cases at L = ${suite.lengths.join(", ")}, llama.cpp threads ${settings.threads}, KV ${settings.kvCacheType}`;
  const result = await sideBySide(
    { name: `harness: bench run --suite niah --arm "${arm.label}"`, run: batteryTask("niah", [arm.label], scratch, { niahCases: onlyCases }) },
    {
      name: `raw node-llama-cpp in-process: greedy on the same ${prompts.length} prompts`,
      run: async () => {
        const raw = await openRaw(model.path, { contextSize: settings.contextSize, threads: settings.threads, kvCacheType: settings.kvCacheType, flashAttention: settings.flashAttention });
        for (const prompt of prompts) await raw.greedy(prompt, spec.maxTokens);
        await raw.close();
      },
    },
    // Seven rounds: on a shared 2-core VM one round scatters ±10%, and three rounds' median cannot resolve the 5% bound.
    { iterations: 7, note: what },
  );
  lines.push(`${what}: harness ${(result.harnessMs / 1000).toFixed(2)} s (${(result.harnessMs / cases.length / 1000).toFixed(2)} s per case, CPU ${(result.harnessCpuMs / 1000).toFixed(2)} s), ` +
    `raw ${(result.rawMs / 1000).toFixed(2)} s (${(result.rawMs / prompts.length / 1000).toFixed(2)} s per case, CPU ${(result.rawCpuMs / 1000).toFixed(2)} s) — ` +
    (kind === "server" ? `${describeRatios(result)} (the harness side includes the server's boot and HTTP, which raw does not pay)` : describeRatios(result, EMBEDDED_TARGET)));
}
rmSync(scratch, { recursive: true, force: true });
console.log(`median suite time:\n${lines.join("\n")}`);
