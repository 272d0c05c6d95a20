import { setTimeout as sleep } from "node:timers/promises";
import type { LlamaLogLevel as LogLevel } from "node-llama-cpp";
import { llamaRuntime, type LlamaCppSettings } from "../sut/llamacpp.js";
import { sumBuffers, type LlamaCppBuffers } from "./llamacpp-buffer-log.js";

/** The context a measurement makes: the embedded arm's settings that size its buffers. */
export type MeasuredContext = Pick<LlamaCppSettings, "contextSize" | "sequences" | "batchSize" | "kvCacheType" | "flashAttention" | "threads">;

/** What llama.cpp allocated for one model and context, and what node-llama-cpp estimated beforehand. */
export interface LlamaCppMeasurement {
  readonly buffers: LlamaCppBuffers;
  /** GgufInsights' formula estimate (no simulation): model bytes and context bytes on the CPU. */
  readonly nodeLlamaCppEstimate: { readonly model: number; readonly context: number };
}

/**
 * llama.cpp hands log lines to node-llama-cpp's callback through a thread-safe queue: they arrive
 * after the call that printed them returns. Waiting for this long with no new line is taken as drained.
 */
const LOG_QUIET_MS = 150;

async function drained(lines: readonly string[]): Promise<void> {
  let seen = -1;
  while (seen !== lines.length) {
    seen = lines.length;
    await sleep(LOG_QUIET_MS);
  }
}

/**
 * Loads `modelPath` in the embedded llama.cpp (CPU, no mmap so the model buffer is an allocation),
 * makes one context and reads the buffer sizes llama.cpp logs. The shared runtime's log level and
 * logger are swapped for the measurement and restored after.
 */
export async function measureLlamaCpp(modelPath: string, context: MeasuredContext): Promise<LlamaCppMeasurement> {
  const { LlamaLogLevel, readGgufFileInfo, GgufInsights } = await import("node-llama-cpp");
  const llama = await llamaRuntime();
  const lines: string[] = [];
  const previous = { level: llama.logLevel, logger: llama.logger };
  llama.logLevel = LlamaLogLevel.info;
  llama.logger = (_level: LogLevel, message: string) => { lines.push(message); };
  try {
    const model = await llama.loadModel({ modelPath, gpuLayers: 0, useMmap: false });
    try {
      const made = await model.createContext({
        contextSize: context.contextSize,
        batchSize: context.batchSize,
        sequences: context.sequences,
        threads: { ideal: context.threads, min: context.threads },
        flashAttention: context.flashAttention,
        experimentalKvCacheKeyType: context.kvCacheType,
        experimentalKvCacheValueType: context.kvCacheType,
      });
      await drained(lines);
      await made.dispose();
    } finally {
      await model.dispose();
    }
    const insights = await GgufInsights.from(await readGgufFileInfo(modelPath), llama);
    const kvType = context.kvCacheType === "F32" ? 0 : 1;
    return {
      buffers: sumBuffers(lines.flatMap((message) => message.split("\n"))),
      nodeLlamaCppEstimate: {
        model: insights.estimateModelResourceRequirements({ gpuLayers: 0, useMmap: false }).cpuRam,
        context: insights.estimateContextResourceRequirements({
          contextSize: context.contextSize, modelGpuLayers: 0, sequences: context.sequences, batchSize: context.batchSize,
          flashAttention: context.flashAttention, kvCacheKeyType: kvType, kvCacheValueType: kvType,
        }).cpuRam,
      },
    };
  } finally {
    llama.logLevel = previous.level;
    llama.logger = previous.logger;
  }
}
