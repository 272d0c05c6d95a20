import type { Command } from "commander";
import { statSync } from "node:fs";
import { exportHf } from "../../export-hf/export.js";
import { ensureFixture, FIXTURE_NAMES, fixtureQuants, resolveModel } from "../../fixtures/registry.js";
import { sha256File } from "../../io/sha256.js";
import { progress, say } from "../output.js";

export function registerFixtures(program: Command): void {
  const command = program
    .command("fixtures")
    .description("build the fixture models (deterministic tiny GGUF files) into the cache and list them")
    .option("--only <fixture>", "build one fixture (default: all)")
    .action(async (options: { only?: string }) => {
      const fixtures = options.only === undefined ? FIXTURE_NAMES : [options.only];
      for (const fixture of fixtures) {
        for (const quant of fixtureQuants(fixture)) {
          progress(`building ${fixture}:${quant}`);
          const path = await ensureFixture(fixture, quant);
          say(`${`${fixture}:${quant}`.padEnd(36)} ${(await sha256File(path)).slice(0, 16)}  ${String(statSync(path).size).padStart(9)} B  ${path}`);
        }
      }
    });
  command
    .command("export-hf <model> <dir>")
    .description("write a model (fixture[:QUANT] or .gguf; quantized weights are written dequantized) as a Hugging Face transformers checkpoint: config.json + model.safetensors (float32)")
    .action(async (reference: string, directory: string) => {
      const model = await resolveModel(reference);
      const hf = await exportHf(model.path, directory, model.id);
      say(`wrote ${directory}: ${String(hf.config.architectures)} (${hf.tensors.length} tensors, ${hf.tensors.reduce((n, t) => n + t.values.length, 0)} parameters)`);
    });
}
