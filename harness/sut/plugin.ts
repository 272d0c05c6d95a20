import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { BenchError } from "../errors.js";
import { GgmlType, GGML_BLOCK } from "../gguf/types.js";
import { sha256File } from "../io/sha256.js";
import { NATIVE_BUILD_DIR } from "../paths.js";
import type { DequantizeRequest, MatvecRequest, SystemUnderTest } from "./types.js";

/** The addon's surface (native/addon/plugin_host.cc). */
interface PluginHost {
  readonly abiVersion: number;
  readonly Plugin: new (path: string) => NativePlugin;
}

interface NativePlugin {
  info(): { abiVersion: number; name: string; version: string; device: string; kernels: string[] };
  dequantize(type: number, blocks: Uint8Array, values: number): Float32Array;
  matvec(type: number, weights: Uint8Array, rows: number, cols: number, x: Float32Array): Float32Array;
  close(): void;
}

/** The plugin host, or why it is not there (a machine without a compiler). */
export function loadPluginHost(): PluginHost {
  const addon = join(NATIVE_BUILD_DIR, "Release", "plugin_host.node");
  if (!existsSync(addon)) {
    const failed = join(NATIVE_BUILD_DIR, "BUILD_FAILED");
    const why = existsSync(failed) ? `: ${readFileSync(failed, "utf8").trim().split("\n").pop()}` : "";
    throw new BenchError(`the native plugin host is not built${why}`, { file: addon, fix: "install g++ and make, then run npm run build:native" });
  }
  return createRequire(import.meta.url)(addon) as PluginHost;
}

/** Bytes `values` values of `type` take, or a clear error when they are not whole blocks. */
export function tensorBytes(type: GgmlType, values: number, what: string): number {
  const block = GGML_BLOCK[type];
  if (values % block.elements !== 0) throw new Error(`${what}: ${values} values of ${GgmlType[type]} are not whole blocks of ${block.elements}`);
  return (values / block.elements) * block.bytes;
}

/**
 * A system under test whose capabilities are a native kernel plugin's kernels: loaded in this
 * process with dlopen (a plugin that crashes takes the run with it; finished arms are already on
 * disk). Buffer sizes are checked here, where the block layouts are known, before any call.
 */
export async function openPluginSut(path: string, label: string): Promise<SystemUnderTest> {
  if (!existsSync(path)) throw new BenchError("no kernel plugin at this path", { file: path, fix: "build it (npm run build:native for the reference plugin) or fix the arm's plugin path" });
  const host = loadPluginHost();
  let plugin: NativePlugin;
  try {
    plugin = new host.Plugin(path);
  } catch (error) {
    throw new BenchError((error as Error).message, { file: path, fix: "a plugin exports bb_plugin_info_get (native/include/bringup_bench_plugin.h)" });
  }
  const info = plugin.info();
  if (info.abiVersion !== host.abiVersion) {
    plugin.close();
    throw new BenchError(`the plugin was built for ABI version ${info.abiVersion}; this harness hosts version ${host.abiVersion}`, { file: path, field: "bb_plugin_info.abi_version", fix: "rebuild the plugin against native/include/bringup_bench_plugin.h" });
  }
  const sha256 = await sha256File(path);
  return {
    label,
    provenance: { kind: "plugin", engine: `${info.name} ${info.version} on ${info.device} (plugin ABI v${info.abiVersion})`, settings: { plugin: path, sha256, device: info.device } },
    ...(info.kernels.includes("dequantize") ? {
      dequantize: async (requests: readonly DequantizeRequest[]) => requests.map((r) => {
        const bytes = tensorBytes(r.type, r.values, "dequantize");
        if (r.blocks.length !== bytes) throw new Error(`dequantize: ${r.blocks.length} bytes for ${r.values} values of ${GgmlType[r.type]} (expected ${bytes})`);
        return plugin.dequantize(r.type, r.blocks, r.values);
      }),
    } : {}),
    ...(info.kernels.includes("matvec") ? {
      matvec: async (requests: readonly MatvecRequest[]) => requests.map((r) => {
        const bytes = tensorBytes(r.type, r.rows * r.cols, "matvec");
        if (r.weights.length !== bytes || r.cols % GGML_BLOCK[r.type].elements !== 0) throw new Error(`matvec: ${r.weights.length} bytes for ${r.rows} × ${r.cols} ${GgmlType[r.type]} (expected ${bytes}, rows of whole blocks)`);
        return plugin.matvec(r.type, r.weights, r.rows, r.cols, r.x);
      }),
    } : {}),
    close: async () => plugin.close(),
  };
}
