/**
 * Child process of the zoo test (and the probe behind docs/findings-cpu.md): writes qwen35-tiny in
 * Q8_0 under one of two tensor-type policies and prints, as one JSON line, how many of 4 prompts give
 * other ids decoded together (one batch per step) than alone, and which llama.cpp CPU library
 * variant node-llama-cpp loaded. Runs in a child because the upstream bug it can meet kills the process.
 *
 *   node dist/test/helpers/qwen35-batched-decode.js DIR fixture       the fixtures' policy (ssm_out F32)
 *   node dist/test/helpers/qwen35-batched-decode.js DIR every-matrix  ssm_out quantized too (the finding)
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { encodeFixtureGguf, matricesInWeightType } from "../../harness/fixtures/architecture.js";
import { buildQwen35Tiny, deltaNetOutputInF32 } from "../../harness/fixtures/families/qwen35.js";
import { GgmlType } from "../../harness/gguf/types.js";
import { LlamaCppSut, ORACLE_SETTINGS } from "../../harness/sut/llamacpp.js";

const POLICIES = { fixture: deltaNetOutputInF32, "every-matrix": matricesInWeightType } as const;
const [directory, policyName] = process.argv.slice(2);
if (!directory || !(policyName in POLICIES)) {
  console.error(`usage: qwen35-batched-decode.js DIR ${Object.keys(POLICIES).join("|")}`);
  process.exit(2);
}
const policy = POLICIES[policyName as keyof typeof POLICIES];

/** ggml picks one libggml-cpu-<variant>.so per CPU at load; the mapped file names the one in use (Linux). */
function loadedCpuVariant(): string {
  try {
    return readFileSync("/proc/self/maps", "utf8").match(/libggml-cpu-([\w]+)\.so/)?.[1] ?? "unknown";
  } catch {
    return "unknown";
  }
}

const path = join(directory, `qwen35-tiny-q8_0-${policyName}.gguf`);
writeFileSync(path, encodeFixtureGguf(buildQwen35Tiny(), GgmlType.Q8_0, policy));
const sut = await LlamaCppSut.open(path, { ...ORACLE_SETTINGS, sequences: 4, contextSize: 128 }, `qwen35 Q8_0 (${policyName})`);
const requests = (await sut.tokenize(["Hello, world!", "The answer is 42.", "import numpy as np", "def fibonacci(n):"])).map((promptIds) => ({ promptIds, maxTokens: 16 }));
const alone = await sut.greedy(requests);
const batched = await sut.batchedGreedy(requests);
const differ = batched.filter((ids, i) => ids.join(",") !== alone[i].join(",")).length;
console.log(JSON.stringify({ policy: policyName, cpuVariant: loadedCpuVariant(), prompts: requests.length, differ }));
await sut.close();
