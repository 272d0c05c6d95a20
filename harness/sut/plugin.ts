import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { BenchError } from "../errors.js";
import { sha256File } from "../io/sha256.js";
import { NATIVE_BUILD_DIR } from "../paths.js";
import { openStdioSut } from "./stdio.js";
import type { SystemUnderTest } from "./types.js";

/** The addon's surface (native/addon/plugin_host.cc). */
interface PluginHost {
  readonly abiVersion: number;
  readonly Plugin: new (path: string) => NativePlugin;
}

export interface NativePlugin {
  info(): { abiVersion: number; name: string; version: string; device: string; kernels: string[] };
  dequantize(type: number, blocks: Uint8Array, values: number): Float32Array;
  matvec(type: number, weights: Uint8Array, rows: number, cols: number, x: Float32Array): Float32Array;
  close(): void;
}

/** Where the plugin host addon is, or why it is not there (a machine without a compiler). */
function pluginHostPath(): string {
  const addon = join(NATIVE_BUILD_DIR, "Release", "plugin_host.node");
  if (!existsSync(addon)) {
    const failed = join(NATIVE_BUILD_DIR, "BUILD_FAILED");
    const why = existsSync(failed) ? `: ${readFileSync(failed, "utf8").trim().split("\n").pop()}` : "";
    throw new BenchError(`the native plugin host is not built${why}`, { file: addon, fix: "install g++ and make, then run npm run build:native" });
  }
  return addon;
}

/** Loads the addon: only in the host process, so a plugin never runs inside the harness. */
export function loadPluginHost(): PluginHost {
  return createRequire(import.meta.url)(pluginHostPath()) as PluginHost;
}

/** The host process's entry point (compiled next to this file). */
const PLUGIN_PROCESS = join(dirname(fileURLToPath(import.meta.url)), "plugin-process.js");

/**
 * A system under test whose capabilities are a native kernel plugin's kernels, hosted in a child
 * process that speaks the runner protocol (harness/sut/plugin-process.ts): a plugin that crashes
 * errors the check it was running, not the run.
 */
export async function openPluginSut(path: string, label: string): Promise<SystemUnderTest> {
  if (!existsSync(path)) throw new BenchError("no kernel plugin at this path", { file: path, fix: "build it (npm run build:native for the reference plugin) or fix the arm's plugin path" });
  pluginHostPath();
  const sut = await openStdioSut([process.execPath, PLUGIN_PROCESS, path], { label, bootTimeoutS: 60 });
  return { ...sut, provenance: { ...sut.provenance, kind: "plugin", settings: { ...sut.provenance.settings, plugin: path, sha256: await sha256File(path) } } };
}
