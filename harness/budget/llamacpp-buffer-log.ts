/**
 * llama.cpp's own account of what it allocated, read from its log: when a model loads and a context
 * is made it prints one "buffer size" line per buffer and backend, e.g.
 *   load_tensors:   CPU_Mapped model buffer size =     3.43 MiB
 *   llama_kv_cache:        CPU KV buffer size =     0.50 MiB
 *   llama_memory_recurrent:        CPU RS buffer size =     0.41 MiB
 *   llama_context:        CPU  output buffer size =     0.00 MiB
 *   sched_reserve:        CPU compute buffer size =     5.04 MiB
 * (llama-model.cpp, llama-kv-cache.cpp, llama-memory-recurrent.cpp, llama-context.cpp).
 */

/** The buffers llama.cpp names, in bytes per backend; several KV lines (a model with a sliding-window cache prints two) add up. */
export interface LlamaCppBuffers {
  readonly model: number;
  readonly kv: number;
  readonly recurrent: number;
  readonly output: number;
  readonly compute: number;
}

export type LlamaCppBufferKind = keyof LlamaCppBuffers;

const LINE = /^\s*(\w+):\s+(\S+)\s+(model|KV|RS|output|compute) buffer size =\s+([0-9.]+) MiB\s*$/;
const KIND: Readonly<Record<string, LlamaCppBufferKind>> = { model: "model", KV: "kv", RS: "recurrent", output: "output", compute: "compute" };

/** One backend's buffer, as one log line said it. */
export interface LlamaCppBufferLine {
  readonly backend: string;
  readonly kind: LlamaCppBufferKind;
  readonly bytes: number;
}

/** Parses one log line; undefined when it is not a buffer-size line. Sizes are printed in MiB to two decimals: ±5 KiB. */
export function parseBufferLine(line: string): LlamaCppBufferLine | undefined {
  const match = LINE.exec(line);
  if (match === null) return undefined;
  return { backend: match[2], kind: KIND[match[3]], bytes: Math.round(Number(match[4]) * 1024 * 1024) };
}

/** Sums buffer lines by kind (every backend: on a CPU build that is CPU and CPU_Mapped). */
export function sumBufferLines(lines: readonly LlamaCppBufferLine[]): LlamaCppBuffers {
  const total = { model: 0, kv: 0, recurrent: 0, output: 0, compute: 0 };
  for (const line of lines) total[line.kind] += line.bytes;
  return total;
}

/** Sums the buffer lines of a log by kind; lines that are not buffer lines are passed over. */
export function sumBuffers(lines: readonly string[]): LlamaCppBuffers {
  return sumBufferLines(lines.flatMap((line) => parseBufferLine(line) ?? []));
}

/**
 * The memory a backend's buffer lives in: a host-side type (`CPU_Mapped` mmapped weights,
 * `CPU_REPACK` re-laid-out weights, `CUDA_Host` pinned staging) is the host's `CPU`; a device's
 * is that device (`CUDA0`, `Metal_Mapped` is `Metal`).
 */
export function backendDevice(backend: string): string {
  if (backend.endsWith("_Host")) return "CPU";
  return backend.split("_")[0];
}

/** Buffer lines summed by kind per device (backendDevice), devices in the order the log first names them. */
export function buffersByDevice(lines: readonly LlamaCppBufferLine[]): Map<string, LlamaCppBuffers> {
  const grouped = new Map<string, LlamaCppBufferLine[]>();
  for (const line of lines) {
    const device = backendDevice(line.backend);
    grouped.set(device, [...(grouped.get(device) ?? []), line]);
  }
  return new Map([...grouped].map(([device, own]) => [device, sumBufferLines(own)]));
}
