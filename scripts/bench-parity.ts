/**
 * npm run bench:parity — wall time of the default parity battery through the harness (bench run's
 * runner, scorers and result files, oracle gap cache warm) against raw node-llama-cpp doing the
 * same SUT evaluations per arm (3 rounds of greedy + teacher-forced over the 16 prompts, and a 4th
 * greedy round standing in for the batched one), measured side by side in one run with tinybench.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolveModel } from "../harness/fixtures/registry.js";
import { loadParitySuite } from "../harness/suites/load.js";
import { openRaw } from "./raw-llamacpp.js";
import { batteryTask, sideBySide } from "./side-by-side.js";

const suite = loadParitySuite("parity16");
const scratch = mkdtempSync(join(tmpdir(), "bench-parity-"));

const { harnessMs, rawMs, ratio } = await sideBySide(
  {
    name: "harness: parity16 battery (bench run --suite parity16)",
    run: batteryTask("parity16", scratch),
  },
  {
    name: "raw node-llama-cpp: same SUT evaluations",
    run: async () => {
      for (const arm of suite.arms) {
        const model = await resolveModel(arm.model);
        const raw = await openRaw(model.path, { flashAttention: arm.settings?.flash_attention ?? false });
        const prompts = suite.prompts.map((text) => raw.tokenize(text));
        for (let round = 0; round < 3; round++) {
          for (const prompt of prompts) {
            const ids = await raw.greedy(prompt, suite.max_tokens);
            await raw.teacherForced(prompt, ids, suite.top_k);
          }
        }
        for (const prompt of prompts) await raw.greedy(prompt, suite.max_tokens);
        await raw.close();
      }
    },
  },
  { iterations: 5 },
);
rmSync(scratch, { recursive: true, force: true });
console.log(`median battery wall time: harness ${(harnessMs / 1000).toFixed(2)} s, raw ${(rawMs / 1000).toFixed(2)} s — harness/raw = ${ratio.toFixed(3)} (overhead ${((ratio - 1) * 100).toFixed(1)}%)`);
