/**
 * npm run bench:parity — wall time of the parity16 battery through the harness (bench run's runner,
 * scorers and result files, oracle gap cache warm) against raw node-llama-cpp doing the same SUT
 * evaluations for the same arms (3 rounds of greedy + teacher-forced over the 16 prompts, and a 4th
 * greedy round standing in for the batched one), measured side by side in alternating rounds (side-by-side.ts).
 * Embedded arms and server arms are compared separately: the raw side does a server arm's
 * evaluations in-process, so that row's difference includes the server's boot and HTTP transport.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolveModel } from "../harness/fixtures/registry.js";
import type { SuiteArm } from "../harness/suites/parity-suite.js";
import { loadParitySuite } from "../harness/suites/load.js";
import { openRaw } from "./raw-llamacpp.js";
import { armsBySut, batteryTask, describeRatios, sideBySide } from "./side-by-side.js";

/** Harness/raw the embedded arms' battery may take (issue #30). */
const EMBEDDED_TARGET = 1.1;

const suite = loadParitySuite("parity16");
const scratch = mkdtempSync(join(tmpdir(), "bench-parity-"));
const groups = armsBySut(suite.arms);
const left = suite.arms.length - groups.embedded.length - groups.server.length;
if (left > 0) console.log(`${left} arm(s) that are neither embedded nor our server (runners) are not benchmarked here`);

/** The SUT evaluations the battery asks of each arm, done directly against node-llama-cpp with the arm's numerics. */
async function rawEvaluations(arms: readonly SuiteArm[]): Promise<void> {
  for (const arm of arms) {
    const model = await resolveModel(arm.model);
    const raw = await openRaw(model.path, { flashAttention: arm.settings?.flash_attention ?? false, kvCacheType: arm.settings?.kv_cache_type ?? "F32", threads: arm.settings?.threads ?? 1 });
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
}

const lines: string[] = [];
for (const [kind, arms] of [["embedded", groups.embedded], ["server", groups.server]] as const) {
  if (arms.length === 0) continue;
  const labels = arms.map((arm) => arm.label);
  const what = `${arms.length} ${kind} arm(s) × ${suite.prompts.length} prompts (${labels.join(", ")})`;
  const result = await sideBySide(
    { name: `harness: bench run --suite parity16, ${kind} arms`, run: batteryTask("parity16", labels, scratch) },
    { name: `raw node-llama-cpp in-process: same evaluations, ${kind} arms`, run: () => rawEvaluations(arms) },
    { iterations: 5, note: what },
  );
  lines.push(`${what}: harness ${(result.harnessMs / 1000).toFixed(2)} s (CPU ${(result.harnessCpuMs / 1000).toFixed(2)} s), raw ${(result.rawMs / 1000).toFixed(2)} s (CPU ${(result.rawCpuMs / 1000).toFixed(2)} s) — ` +
    (kind === "server" ? `${describeRatios(result)} (the harness side includes the server's boot and HTTP, which raw does not pay)` : describeRatios(result, EMBEDDED_TARGET)));
}
rmSync(scratch, { recursive: true, force: true });
console.log(`median battery wall time:\n${lines.join("\n")}`);
