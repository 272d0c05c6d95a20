import type { ModelRef } from "../fixtures/registry.js";
import { LlamaCppSut, ORACLE_SETTINGS } from "../sut/llamacpp.js";

/**
 * An oracle is a system whose outputs are taken as the reference. The llama.cpp oracle is the
 * embedded SUT opened with the deterministic recipe (flash attention off, F32 KV cache, one
 * explicit thread), which is recorded in every goldens manifest.
 */
export function openLlamaCppOracle(model: ModelRef): Promise<LlamaCppSut> {
  return LlamaCppSut.open(model.path, ORACLE_SETTINGS, `oracle llama.cpp ${model.id}`);
}

export const ORACLE_NAME = "llama.cpp";
