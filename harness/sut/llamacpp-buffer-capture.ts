import { setTimeout as sleep } from "node:timers/promises";
import type { Llama, LlamaLogLevel as LogLevel } from "node-llama-cpp";
import { parseBufferLine, type LlamaCppBufferLine } from "../budget/llamacpp-buffer-log.js";
import { llamaCppDeviceAllocations } from "../budget/memory-gate.js";
import type { AllocationReport } from "./types.js";

/**
 * llama.cpp hands log lines to node-llama-cpp's callback through a thread-safe queue: they arrive
 * after the call that printed them returns. A capture is drained once a compute-buffer line (the
 * last buffer a context reserves) has arrived and no line has for this long; without one, it gives
 * up after DRAIN_LIMIT_MS (the buffers it lacks are then "not reported", never zero).
 */
const QUIET_MS = 25;
const DRAIN_LIMIT_MS = 2000;

/** Captures run one at a time: the runtime and its logger are the process's, and a buffer line names no model. */
let queue: Promise<unknown> = Promise.resolve();

async function drained(lines: readonly LlamaCppBufferLine[], seen: () => number): Promise<void> {
  const deadline = Date.now() + DRAIN_LIMIT_MS;
  let count = -1;
  while (count !== seen() || (!lines.some((line) => line.kind === "compute") && Date.now() < deadline)) {
    count = seen();
    await sleep(QUIET_MS);
  }
}

/**
 * Runs `load` (a model loaded into `llama`, the process's runtime, and its contexts made with the settings that size them) while
 * reading the buffer lines llama.cpp logs: its own account of what it allocated, per backend
 * (budget/llamacpp-buffer-log.ts). The shared runtime's log level and logger are swapped for the
 * capture and restored after; a message the previous level would have shown still goes to the
 * previous logger, so a capture hides no warning.
 */
export function captureBufferLines<T>(llama: Llama, load: () => Promise<T>): Promise<{ readonly value: T; readonly lines: LlamaCppBufferLine[] }> {
  const capture = queue.then(async () => {
    const { LlamaLogLevel, LlamaLogLevelGreaterThanOrEqual } = await import("node-llama-cpp");
    const lines: LlamaCppBufferLine[] = [];
    let messages = 0;
    const previous = { level: llama.logLevel, logger: llama.logger };
    llama.logLevel = LlamaLogLevel.info;
    llama.logger = (level: LogLevel, message: string) => {
      messages++;
      for (const line of message.split("\n")) {
        const parsed = parseBufferLine(line);
        if (parsed !== undefined) lines.push(parsed);
      }
      if (LlamaLogLevelGreaterThanOrEqual(level, previous.level)) previous.logger(level, message);
    };
    try {
      const value = await load();
      await drained(lines, () => messages);
      return { value, lines };
    } finally {
      llama.logLevel = previous.level;
      llama.logger = previous.logger;
    }
  });
  queue = capture.catch(() => undefined);
  return capture;
}

/** The KV cache types llama.cpp is asked for here, in bytes per element. */
const KV_BYTES = { F32: 4, F16: 2 } as const;

/**
 * What a llama.cpp engine allocated (its buffer lines, by device), and the shape it allocated for:
 * context per sequence, sequences, batch and KV type, as it was asked to make its context.
 */
export function llamaCppAllocationReport(lines: readonly LlamaCppBufferLine[], settings: { readonly contextSize: number; readonly sequences: number; readonly batchSize: number; readonly kvCacheType: keyof typeof KV_BYTES }): AllocationReport {
  return {
    devices: llamaCppDeviceAllocations(lines),
    shape: { contextPerSlot: settings.contextSize, slots: settings.sequences, batchTokens: settings.batchSize, kvBytesPerElement: KV_BYTES[settings.kvCacheType] },
  };
}
