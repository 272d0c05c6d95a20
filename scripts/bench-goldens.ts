/**
 * npm run bench:goldens — time to make the parity16 goldens through the harness, against raw
 * node-llama-cpp doing the same evaluations (16 greedy runs of T tokens + 16 teacher-forced passes),
 * measured side by side in alternating rounds (side-by-side.ts), wall and CPU time. Target: the
 * harness adds at most 10% (issue #30).
 */
import { join } from "node:path";
import { tmpdir } from "node:os";
import { mkdtempSync, rmSync } from "node:fs";
import { resolveModel } from "../harness/fixtures/registry.js";
import { makeGoldens } from "../harness/goldens/make.js";
import { loadParitySuite } from "../harness/suites/load.js";
import { openRaw } from "./raw-llamacpp.js";
import { describeRatios, sideBySide } from "./side-by-side.js";

/** Harness/raw the goldens making may take (issue #30). */
const GOLDENS_TARGET = 1.1;

const suite = loadParitySuite("parity16");
const model = await resolveModel(suite.oracle.model);
const scratch = mkdtempSync(join(tmpdir(), "bench-goldens-"));

const result = await sideBySide(
  { name: "harness: bench goldens make (parity16)", run: () => makeGoldens(suite, model, join(scratch, "goldens")).then(() => undefined) },
  {
    name: "raw node-llama-cpp: same evaluations",
    run: async () => {
      const raw = await openRaw(model.path);
      for (const text of suite.prompts) {
        const prompt = raw.tokenize(text);
        const greedy = await raw.greedy(prompt, suite.max_tokens);
        await raw.teacherForced(prompt, greedy, suite.top_k);
      }
      await raw.close();
    },
  },
  { iterations: 7, note: `each side: ${suite.prompts.length} prompts, greedy T = ${suite.max_tokens} + teacher-forced top-${suite.top_k}, oracle recipe (F32 KV, 1 thread, flash attention off)` },
);
rmSync(scratch, { recursive: true, force: true });
console.log(`median: harness ${result.harnessMs.toFixed(1)} ms (CPU ${result.harnessCpuMs.toFixed(0)} ms), raw ${result.rawMs.toFixed(1)} ms (CPU ${result.rawCpuMs.toFixed(0)} ms) — ${describeRatios(result, GOLDENS_TARGET)}`);
