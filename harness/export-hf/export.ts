import { join } from "node:path";
import { BenchError } from "../errors.js";
import { writeDirectoryAtomic } from "../io/atomic-write.js";
import { MODEL_FAMILIES } from "../families/registry.js";
import { writeFile } from "node:fs/promises";
import { HARNESS_VERSION } from "../version.js";
import { GgufModel } from "./gguf-model.js";
import { configJsonText } from "./config-json.js";
import type { HfModel } from "./hf-model.js";
import { encodeSafetensors } from "./safetensors.js";

/** One exporter per llama.cpp architecture (its family's, harness/families/registry.ts): GGUF tensors and keys to transformers' names and config. */
const EXPORTERS: ReadonlyMap<string, (model: GgufModel) => HfModel> = new Map(MODEL_FAMILIES.map((family) => [family.architecture, family.exportHf]));

export const EXPORTABLE_ARCHITECTURES: readonly string[] = [...EXPORTERS.keys()];

/** Reads a GGUF model and converts it to the transformers layout (nothing written). */
export function hfModelOf(ggufPath: string): HfModel {
  const model = new GgufModel(ggufPath);
  const exporter = EXPORTERS.get(model.architecture);
  if (exporter === undefined) {
    throw new BenchError(`architecture ${model.architecture} has no Hugging Face exporter`, { file: ggufPath, field: "general.architecture", fix: `export one of ${EXPORTABLE_ARCHITECTURES.join(", ")}` });
  }
  return exporter(model);
}

/**
 * Writes `directory` as a unit: config.json and model.safetensors (float32), with the source
 * model's name recorded in the safetensors metadata.
 */
export async function exportHf(ggufPath: string, directory: string, source: string): Promise<HfModel> {
  const hf = hfModelOf(ggufPath);
  const safetensors = encodeSafetensors(hf.tensors, { format: "pt", source, exporter: `bringup-bench ${HARNESS_VERSION}` });
  await writeDirectoryAtomic(directory, async (temporary) => {
    await writeFile(join(temporary, "config.json"), configJsonText(hf.config));
    await writeFile(join(temporary, "model.safetensors"), safetensors);
  });
  return hf;
}
