import { InvalidArgumentError, type Command } from "commander";
import { computeBudget } from "../../budget/arithmetic.js";
import { formatBudget } from "../../budget/format.js";
import { measureLlamaCpp } from "../../budget/measure-llamacpp.js";
import { llamaCppDeviceAllocations, memoryGate } from "../../budget/memory-gate.js";
import { modelShape } from "../../budget/model-shape.js";
import { budgetFile, loadDevice, loadPolicy } from "../../budget/policy.js";
import { resolveModel } from "../../fixtures/registry.js";
import { readGgufHeader } from "../../gguf/read.js";
import { EXIT } from "../../results/exit-code.js";
import { setExitCode } from "../exit-code.js";
import { positiveCount } from "../option-parsers.js";
import { say } from "../output.js";

interface BudgetOptions {
  policy: string;
  device: string;
  context: number;
  slots: number;
  batch: number;
  json?: boolean;
  measure?: boolean;
  tolerance: number;
}

function fraction(value: string): number {
  const n = Number(value);
  if (!(n >= 0 && n < 1)) throw new InvalidArgumentError("expected a fraction in [0, 1), e.g. 0.1");
  return n;
}

export function registerBudget(program: Command): void {
  program
    .command("budget <model>")
    .description("predict a model's memory per device by category (weights packed, twins, embedding/head, KV, recurrent state, activations, decode transient, trace region) from its GGUF header, a residency policy and a device; exit 1 when it does not fit")
    .option("--policy <name|file>", "residency policy: a name under budgets/policies/ or a JSON file", "llamacpp-cpu")
    .option("--device <name|file>", "device description: a name under budgets/devices/ or a JSON file", "cpu-host")
    .option("--context <tokens>", "tokens per slot", positiveCount, 1024)
    .option("--slots <n>", "parallel sequences", positiveCount, 1)
    .option("--batch <tokens>", "tokens per ubatch", positiveCount, 512)
    .option("--json", "print the budget as JSON")
    .option("--measure", "also load the model in the embedded llama.cpp (CPU, F32 KV, no flash attention, one thread) with these slots and context, and gate its buffers against the budget per category")
    .option("--tolerance <fraction>", "memory gate: measured may exceed the budget by this fraction", fraction, 0.1)
    .action(async (reference: string, options: BudgetOptions) => {
      const policy = loadPolicy(budgetFile("policies", options.policy));
      const device = loadDevice(budgetFile("devices", options.device));
      // A path is read header-only, so a 27B header (or a header-only file) costs kilobytes; a fixture is built first.
      const path = reference.endsWith(".gguf") || reference.includes("/") ? reference : (await resolveModel(reference)).path;
      const shape = modelShape(readGgufHeader(path), path);
      const request = { contextPerSlot: options.context, slots: options.slots, batchTokens: options.batch };
      const budget = computeBudget(shape, policy, device, request);
      if (options.json === true) say(JSON.stringify({ model: reference, policy: policy.name, device: device.name, request, ...budget }, null, 1));
      else for (const line of formatBudget(reference, policy, device, request, budget)) say(line);
      let gatePassed = true;
      if (options.measure === true) {
        const measured = await measureLlamaCpp(path, { contextSize: options.context, sequences: options.slots, batchSize: options.batch, kvCacheType: "F32", flashAttention: false, threads: 1 });
        const gate = memoryGate(budget.perDevice, llamaCppDeviceAllocations(measured.lines), options.tolerance, budget.usablePerDevice);
        say(gate.summary);
        gatePassed = gate.status === "pass";
      }
      setExitCode(budget.fits && gatePassed ? EXIT.pass : EXIT.gateFailed);
    });
}
