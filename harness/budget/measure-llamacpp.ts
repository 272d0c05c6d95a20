import { captureBufferLines } from "../sut/llamacpp-buffer-capture.js";
import { createLlamaCppContext, llamaRuntime, loadModelInMemory, type LlamaCppSettings } from "../sut/llamacpp.js";
import { sumBufferLines, type LlamaCppBufferLine, type LlamaCppBuffers } from "./llamacpp-buffer-log.js";

/** The context a measurement makes: the embedded arm's settings that size its buffers. */
export type MeasuredContext = Pick<LlamaCppSettings, "contextSize" | "sequences" | "batchSize" | "kvCacheType" | "flashAttention" | "threads">;

/** What llama.cpp allocated for one model and context, and what node-llama-cpp estimated beforehand. */
export interface LlamaCppMeasurement {
  /** Every backend's buffers summed by kind. */
  readonly buffers: LlamaCppBuffers;
  /** The buffer lines as llama.cpp logged them, one per backend and buffer. */
  readonly lines: readonly LlamaCppBufferLine[];
  /** GgufInsights' formula estimate (no simulation): model bytes and context bytes on the CPU. */
  readonly nodeLlamaCppEstimate: { readonly model: number; readonly context: number };
}

/**
 * Loads `modelPath` in the embedded llama.cpp as the embedded arm does (CPU, no mmap),
 * makes one context and reads the buffer sizes llama.cpp logs (sut/llamacpp-buffer-capture.ts).
 */
export async function measureLlamaCpp(modelPath: string, context: MeasuredContext): Promise<LlamaCppMeasurement> {
  const { readGgufFileInfo, GgufInsights } = await import("node-llama-cpp");
  const llama = await llamaRuntime();
  const { lines } = await captureBufferLines(llama, async () => {
    const model = await loadModelInMemory(llama, modelPath);
    try {
      const made = await createLlamaCppContext(model, context);
      await made.dispose();
    } finally {
      await model.dispose();
    }
  });
  const insights = await GgufInsights.from(await readGgufFileInfo(modelPath), llama);
  const kvType = context.kvCacheType === "F32" ? 0 : 1;
  return {
    buffers: sumBufferLines(lines),
    lines,
    nodeLlamaCppEstimate: {
      model: insights.estimateModelResourceRequirements({ gpuLayers: 0, useMmap: false }).cpuRam,
      context: insights.estimateContextResourceRequirements({
        contextSize: context.contextSize, modelGpuLayers: 0, sequences: context.sequences, batchSize: context.batchSize,
        flashAttention: context.flashAttention, kvCacheKeyType: kvType, kvCacheValueType: kvType,
      }).cpuRam,
    },
  };
}
