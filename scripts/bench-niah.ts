/**
 * npm run bench:niah — wall time of the needle suite at L = 4000 (3 depths) through the harness
 * (haystack building with the SUT's tokenizer, greedy decode, scoring, result files) against raw
 * node-llama-cpp decoding the same prompts, measured side by side in one run with tinybench.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Token } from "node-llama-cpp";
import { resolveModel } from "../harness/fixtures/registry.js";
import { buildHaystack } from "../harness/niah/haystack.js";
import { needleFromSeed, needleSeed } from "../harness/niah/needle.js";
import { armSettings } from "../harness/runner/run.js";
import { needleCases } from "../harness/runner/niah-runner.js";
import { loadSuite } from "../harness/suites/load.js";
import { resolveNiahSuite, type NiahSuite } from "../harness/suites/niah-suite.js";
import { LlamaCppSut } from "../harness/sut/llamacpp.js";
import { openRaw } from "./raw-llamacpp.js";
import { batteryTask, sideBySide } from "./side-by-side.js";

const suite = loadSuite("niah") as NiahSuite;
const spec = resolveNiahSuite(suite);
const arm = suite.arms[0];
const settings = armSettings(arm, {}, 1);
const model = await resolveModel(arm.model);

// The raw side gets the exact prompts the harness builds, prepared once outside the timing.
const builder = await LlamaCppSut.open(model.path, settings);
const prompts: Token[][] = [];
for (const { length, depth, trial } of needleCases(spec)) {
  const needle = needleFromSeed(needleSeed(trial, depth, length), spec.needleAlphabet, spec.needleLength);
  prompts.push((await buildHaystack(builder, spec, needle, length, depth)).promptIds as Token[]);
}
await builder.close();

const scratch = mkdtempSync(join(tmpdir(), "bench-niah-"));
const { harnessMs, rawMs, ratio } = await sideBySide(
  {
    name: `harness: niah suite (${prompts.length} cases at L = ${suite.lengths.join(", ")})`,
    run: batteryTask("niah", scratch),
  },
  {
    name: "raw node-llama-cpp: greedy on the same prompts",
    run: async () => {
      const raw = await openRaw(model.path, { contextSize: settings.contextSize, threads: settings.threads });
      for (const prompt of prompts) await raw.greedy(prompt, spec.maxTokens);
      await raw.close();
    },
  },
  { iterations: 3, note: `llama.cpp threads: ${settings.threads}` },
);
rmSync(scratch, { recursive: true, force: true });
console.log(`median suite wall time at L = ${suite.lengths.join(", ")}: harness ${(harnessMs / 1000).toFixed(2)} s ` +
  `(${(harnessMs / prompts.length / 1000).toFixed(2)} s per case), raw ${(rawMs / 1000).toFixed(2)} s — harness/raw = ${ratio.toFixed(3)}`);
