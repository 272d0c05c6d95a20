/**
 * Child process of the zoo test: writes qwen35-tiny with EVERY matrix quantized (ssm_out included,
 * unlike the fixture's policy) and prints, as one JSON line, how many of 4 prompts give other ids
 * decoded together (one batch per step) than alone. Run in a child because the llama.cpp bug it
 * watches can kill the process.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { encodeFixtureGguf, matricesInWeightType } from "../../harness/fixtures/architecture.js";
import { buildQwen35Tiny } from "../../harness/fixtures/families/qwen35.js";
import { GgmlType } from "../../harness/gguf/types.js";
import { LlamaCppSut, ORACLE_SETTINGS } from "../../harness/sut/llamacpp.js";

const [directory] = process.argv.slice(2);
const path = join(directory, "qwen35-tiny-ssm-out-q8_0.gguf");
writeFileSync(path, encodeFixtureGguf(buildQwen35Tiny(), GgmlType.Q8_0, matricesInWeightType));
const sut = await LlamaCppSut.open(path, { ...ORACLE_SETTINGS, sequences: 4, contextSize: 128 }, "ssm_out Q8_0");
const requests = (await sut.tokenize(["Hello, world!", "The answer is 42.", "import numpy as np", "def fibonacci(n):"])).map((promptIds) => ({ promptIds, maxTokens: 16 }));
const alone = await sut.greedy(requests);
const batched = await sut.batchedGreedy(requests);
console.log(JSON.stringify({ differ: batched.filter((ids, i) => ids.join(",") !== alone[i].join(",")).length }));
await sut.close();
