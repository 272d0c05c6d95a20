import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { BenchError } from "../errors.js";
import { sha256File } from "../io/sha256.js";
import { NATIVE_BUILD_DIR } from "../paths.js";
import { openStdioSut, type StdioSutOptions } from "./stdio.js";
import type { KernelRequest, KernelTimingPlan, SystemUnderTest } from "./types.js";

/** The addon's surface (native/addon/plugin_host.cc). */
interface PluginHost {
  readonly abiVersion: number;
  readonly Plugin: new (path: string) => NativePlugin;
}

/**
 * One tensor of a kernel call (bb_tensor in native/include/bringup_bench_plugin.h): shape outermost
 * first in elements; strides in bytes (omitted: dense row-major, packed blocks innermost). The
 * host views `data`'s bytes in place, so outputs are written into the caller's sentinel-filled arrays.
 */
export interface TensorArg {
  readonly name: string;
  /** ggml type number (GgmlType): F32 0, F16 1, Q8_0 8, Q4_K 12, Q5_K 13, Q6_K 14, I32 26, BF16 30. */
  readonly dtype: number;
  readonly shape: readonly number[];
  readonly strides?: readonly number[];
  readonly data: ArrayBufferView;
}

/** An (op, encoding) pair a plugin registers; encoding is "<IN>:<OUT>" (docs/kernel-ops.md). */
export interface OpPair {
  readonly op: string;
  readonly encoding: string;
}

/** A call whose descriptors the host built once: a timing loop pays one argument-less call each time. */
export interface PreparedCall {
  run(): void;
  /** `calls` calls back to back, no clock inside: the caller times the batch with its own clock. */
  runBatch(calls: number): void;
  /** Nanoseconds per call, timed in C (the plugin's bb_op_time, or the host's own tight loop). */
  timeInPlugin(warmup: number, repetitions: number): Float64Array;
}

export interface NativePlugin {
  /** `ops` is filled for ABI v1 plugins too: the host serves their two kernels as "dequantize" and "matvec". */
  info(): { abiVersion: number; name: string; version: string; device: string; ownTimer: boolean; ops: OpPair[] };
  /** Runs a registered pair, writing the outputs in place; throws with the plugin's reason, or names an unregistered pair. */
  run(op: string, encoding: string, inputs: readonly TensorArg[], outputs: readonly TensorArg[], attrsJson: string): void;
  prepare(op: string, encoding: string, inputs: readonly TensorArg[], outputs: readonly TensorArg[], attrsJson: string): PreparedCall;
  timeInPlugin(op: string, encoding: string, inputs: readonly TensorArg[], outputs: readonly TensorArg[], attrsJson: string, warmup: number, repetitions: number): Float64Array;
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
 * process that speaks the runner protocol (harness/sut/plugin-process.ts). A plugin that crashes
 * takes only its host process down: the call it was in errors with the signal, and the next call
 * gets a fresh host, so the checks after it still run. Every host is a tracked child, stopped by
 * the shutdown ladder (harness/sut/child-process.ts) like a runner.
 */
export async function openPluginSut(path: string, label: string, context: Partial<Pick<StdioSutOptions, "onLog" | "onWarning" | "shutdownGraceS" | "onProcess" | "env" | "bootTimeoutS" | "signal">> = {}): Promise<SystemUnderTest> {
  if (!existsSync(path)) throw new BenchError("no kernel plugin at this path", { file: path, fix: "build it (npm run build:native for the reference plugin) or fix the arm's plugin path" });
  pluginHostPath();
  let exited = false;
  const start = () => {
    exited = false;
    return openStdioSut([process.execPath, PLUGIN_PROCESS, path], { ...context, label, role: "plugin", bootTimeoutS: context.bootTimeoutS ?? 60, onExit: () => { exited = true; } });
  };
  let host = await start();
  const live = async (): Promise<SystemUnderTest> => {
    if (exited) {
      await host.close();
      host = await start();
    }
    return host;
  };
  const { kernel, kernelTime } = host;
  return {
    ...host,
    ...(kernel === undefined ? {} : { kernel: async (request: KernelRequest) => (await live()).kernel!(request) }),
    ...(kernelTime === undefined ? {} : { kernelTime: async (request: KernelRequest, plan: KernelTimingPlan) => (await live()).kernelTime!(request, plan) }),
    close: () => host.close(),
    provenance: { ...host.provenance, kind: "plugin", settings: { ...host.provenance.settings, plugin: path, sha256: await sha256File(path) } },
  };
}
