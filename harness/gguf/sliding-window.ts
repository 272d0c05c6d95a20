import type { GgufFile } from "./types.js";

/**
 * The sliding-window size of a model's local attention layers (`<arch>.attention.sliding_window`,
 * as gemma-style models declare it), or undefined for a model that attends to the whole context.
 */
export function slidingWindowOf(file: GgufFile): number | undefined {
  const architecture = file.metadata.get("general.architecture")?.value;
  if (typeof architecture !== "string") return undefined;
  const value = Number(file.metadata.get(`${architecture}.attention.sliding_window`)?.value);
  return Number.isInteger(value) && value > 0 ? value : undefined;
}
