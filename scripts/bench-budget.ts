/**
 * npm run bench:budget — the llama.cpp-on-CPU budget (budgets/policies/llamacpp-cpu.json) for every
 * base fixture (each family, each quant) at several contexts and slot counts, beside the buffers
 * llama.cpp itself allocates for the same model and context (its log's model, KV, RS, output and
 * compute buffer sizes) and node-llama-cpp's GgufInsights estimate. Prints a Markdown table
 * (docs/memory-budget.md) and exits 1 when any total is off by more than 10%.
 * BENCH_BUDGET_MODELS=a,b limits the fixtures (fixture:QUANT).
 */
import { compareWithLlamaCpp, comparisonTable, COMPARISON_TOLERANCE, type BudgetComparison } from "../harness/budget/compare.js";
import { measureLlamaCpp } from "../harness/budget/measure-llamacpp.js";
import { modelShape } from "../harness/budget/model-shape.js";
import { budgetFile, loadDevice, loadPolicy } from "../harness/budget/policy.js";
import { fixtureQuants, resolveModel } from "../harness/fixtures/registry.js";
import { readGgufHeader } from "../harness/gguf/read.js";
import { describeMachine, machineInfo } from "../harness/results/machine.js";

/** One fixture per family (and the real-vocabulary and long-head ones), every quant each comes in. */
const FIXTURES = ["tiny-random", "qwen35-tiny", "qwen35moe-tiny", "gemma4-tiny", "nemotron-h-moe-tiny", "copy-4k", "llama-llama3-vocab", "qwen35-qwen3-vocab"];
const CONTEXTS: ReadonlyArray<readonly [number, number]> = [[256, 1], [1024, 1], [4096, 1], [512, 4]];

const models = process.env.BENCH_BUDGET_MODELS?.split(",") ?? FIXTURES.flatMap((fixture) => fixtureQuants(fixture).map((quant) => `${fixture}:${quant}`));
const policy = loadPolicy(budgetFile("policies", "llamacpp-cpu"));
const device = loadDevice(budgetFile("devices", "cpu-host"));
const rows: BudgetComparison[] = [];
for (const reference of models) {
  const model = await resolveModel(reference);
  const shape = modelShape(readGgufHeader(model.path), model.path);
  for (const [contextSize, sequences] of CONTEXTS) {
    const request = { contextPerSlot: contextSize, slots: sequences, batchTokens: 512 };
    const measurement = await measureLlamaCpp(model.path, { contextSize, sequences, batchSize: 512, kvCacheType: "F32", flashAttention: false, threads: 1 });
    rows.push(compareWithLlamaCpp(reference, shape, policy, device, request, measurement));
  }
}
console.log(`machine: ${describeMachine(machineInfo())}\n`);
for (const line of comparisonTable(rows)) console.log(line);
const worst = rows.reduce((a, b) => (Math.abs(b.error) > Math.abs(a.error) ? b : a));
const outside = rows.filter((row) => Math.abs(row.error) > COMPARISON_TOLERANCE);
console.log(`\n${rows.length} rows; worst ${worst.model} ${worst.request.contextPerSlot}x${worst.request.slots} at ${(worst.error * 100).toFixed(1)}%; ${outside.length} outside ±${COMPARISON_TOLERANCE * 100}%`);
process.exit(outside.length === 0 ? 0 : 1);
