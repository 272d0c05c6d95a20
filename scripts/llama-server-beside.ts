import type { ManagedServer } from "../harness/sut/managed-server.js";
import { startServerCommand } from "../harness/sut/server-command.js";

/** The settings a benchmark gives our server, for llama-server to get the same. */
export interface BesideSettings {
  readonly slots: number;
  readonly contextPerSlot: number;
  readonly threads: number;
  /** `-b`; llama-server's own default where absent. */
  readonly batch?: number;
  readonly bootTimeoutS: number;
}

/**
 * llama.cpp's llama-server started with our server's numerics and slots, for a side-by-side
 * benchmark: F16 KV, flash attention off, no warm-up, the same threads for prompt and decode.
 * Its context is shared by its slots where ours is per slot, so it gets slots × the per-slot cells.
 */
export function startLlamaServerBeside(binary: string, modelPath: string, settings: BesideSettings): Promise<ManagedServer> {
  return startServerCommand([binary, "-m", modelPath, "--host", "127.0.0.1", "--port", "{port}", "-np", String(settings.slots), "-c", String(settings.contextPerSlot * settings.slots),
    "-t", String(settings.threads), "-tb", String(settings.threads), "-fa", "off", ...(settings.batch === undefined ? [] : ["-b", String(settings.batch)]),
    "-ctk", "f16", "-ctv", "f16", "--no-warmup"], { label: "llama-server", bootTimeoutS: settings.bootTimeoutS });
}
