import { createInterface } from "node:readline";
import { GgmlType, GGML_BLOCK, isKnownGgmlType, tensorByteSize } from "../gguf/types.js";
import { loadPluginHost, type NativePlugin } from "./plugin.js";
import { float32FromBase64, RUNNER_PROTOCOL, RUNNER_PROTOCOL_VERSION, toBase64 } from "./stdio.js";

/**
 * The kernel plugin host process: loads one plugin (native/include/bringup_bench_plugin.h) and
 * serves its kernels over the runner protocol. The harness starts it per arm, so a plugin that
 * crashes ends this process, not the run: the check errors with the signal and the run goes on.
 * Buffer sizes are checked here, where the block layouts are known, before any kernel call.
 */
type Params = Record<string, unknown>;

/** Bytes `values` values of `type` take; they must be whole blocks. */
function tensorBytes(type: GgmlType, values: number, what: string): number {
  if (values % GGML_BLOCK[type].elements !== 0) throw new Error(`${what}: ${values} values of ${GgmlType[type]} are not whole blocks of ${GGML_BLOCK[type].elements}`);
  return tensorByteSize(type, values);
}

function typeOf(params: Params): GgmlType {
  const id = GgmlType[params.type as keyof typeof GgmlType];
  if (id === undefined || !isKnownGgmlType(id)) throw new Error(`unknown tensor type ${JSON.stringify(params.type)}`);
  return id;
}

function serveKernels(plugin: NativePlugin): Record<string, (params: Params) => unknown> {
  return {
    dequantize: (params) => {
      const type = typeOf(params);
      const values = Number(params.values);
      const blocks = Uint8Array.from(Buffer.from(String(params.blocks), "base64"));
      const bytes = tensorBytes(type, values, "dequantize");
      if (blocks.length !== bytes) throw new Error(`dequantize: ${blocks.length} bytes for ${values} values of ${GgmlType[type]} (expected ${bytes})`);
      return { values: toBase64(plugin.dequantize(type, blocks, values)) };
    },
    matvec: (params) => {
      const type = typeOf(params);
      const rows = Number(params.rows);
      const cols = Number(params.cols);
      const weights = Uint8Array.from(Buffer.from(String(params.weights), "base64"));
      const bytes = tensorBytes(type, rows * cols, "matvec");
      tensorBytes(type, cols, "matvec rows");
      if (weights.length !== bytes) throw new Error(`matvec: ${weights.length} bytes for ${rows} × ${cols} ${GgmlType[type]} (expected ${bytes})`);
      return { y: toBase64(plugin.matvec(type, weights, rows, cols, float32FromBase64(String(params.x)))) };
    },
  };
}

function send(message: unknown): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

function main(path: string): void {
  let plugin: NativePlugin;
  let methods: Record<string, (params: Params) => unknown>;
  let hello: Record<string, unknown>;
  try {
    const host = loadPluginHost();
    plugin = new host.Plugin(path);
    const info = plugin.info();
    if (info.abiVersion !== host.abiVersion) {
      throw new Error(`the plugin was built for ABI version ${info.abiVersion}; this harness hosts version ${host.abiVersion} (rebuild it against native/include/bringup_bench_plugin.h)`);
    }
    const all = serveKernels(plugin);
    methods = Object.fromEntries(info.kernels.filter((k) => k in all).map((k) => [k, all[k]]));
    hello = { engine: `${info.name} ${info.version} on ${info.device} (plugin ABI v${info.abiVersion})`, capabilities: Object.keys(methods), settings: { device: info.device } };
  } catch (error) {
    send({ protocol: RUNNER_PROTOCOL, version: RUNNER_PROTOCOL_VERSION, error: `${path}: ${(error as Error).message}` });
    return;
  }
  send({ protocol: RUNNER_PROTOCOL, version: RUNNER_PROTOCOL_VERSION, ...hello });
  const lines = createInterface({ input: process.stdin });
  lines.on("line", (line) => {
    const request = JSON.parse(line) as { id: number; method: string; params?: Params };
    if (request.method === "shutdown") {
      send({ id: request.id, result: {} });
      plugin.close();
      lines.close();
      return;
    }
    const method = methods[request.method];
    if (method === undefined) return send({ id: request.id, error: { message: `unknown method ${JSON.stringify(request.method)}` } });
    try {
      send({ id: request.id, result: method(request.params ?? {}) });
    } catch (error) {
      // The addon marks a kernel's BB_UNSUPPORTED_TYPE: the protocol's "unsupported" (that case is skipped).
      const unsupported = (error as { unsupportedType?: boolean }).unsupportedType === true;
      send({ id: request.id, error: { message: (error as Error).message, ...(unsupported ? { unsupported: true } : {}) } });
    }
  });
}

// Started by openPluginSut as: node plugin-process.js LIBRARY
if (process.argv[1]?.endsWith("plugin-process.js")) main(process.argv[2] ?? "");
