import { createInterface } from "node:readline";
import { DTYPES, type KernelTensor } from "../../kernels/ops/tensor.js";
import { kernelOutputsToWire, kernelRequestFromWire, kernelTimingToWire, timingPlanFromWire } from "./kernel-wire.js";
import { loadPluginHost, type NativePlugin, type TensorArg } from "./plugin.js";
import { RUNNER_PROTOCOL, RUNNER_PROTOCOL_VERSION } from "./stdio.js";
import type { KernelRequest, KernelTiming, KernelTimingPlan } from "./types.js";

/**
 * The kernel plugin host process: loads one plugin (native/include/bringup_bench_plugin.h) and
 * serves its kernels over the runner protocol (`kernel`, `kernel_time`). The harness starts it per
 * arm, so a plugin that crashes ends this process, not the run: the check errors with the signal
 * and the run goes on. Descriptors are checked against their shapes before any kernel call.
 */
type Params = Record<string, unknown>;

const tensorArg = (t: KernelTensor): TensorArg => ({ name: t.name, dtype: DTYPES[t.dtype].id, shape: t.shape, data: t.data });

function prepareCall(plugin: NativePlugin, request: KernelRequest) {
  return plugin.prepare(request.op, request.encoding, request.inputs.map(tensorArg), request.outputs.map(tensorArg), JSON.stringify(request.attrs));
}

const nowNs = () => process.hrtime.bigint();

/** A sample is a batch of calls lasting about this long: the clock's own cost vanishes from short kernels. */
const SAMPLE_NS = 1e6;

/**
 * Times a prepared call as the harness sees it (the harness's clock around a batch of back-to-back
 * calls, one N-API transition per batch) and,
 * alternating with it batch for batch, as the plugin's own C loop times the same number of calls:
 * both series see the same machine load, so the difference of their medians is the harness's
 * overhead (docs/kernel-plugins.md, "Kernel timing"), not a change of weather on a shared machine.
 */
function timeKernel(plugin: NativePlugin, request: KernelRequest, plan: KernelTimingPlan): KernelTiming {
  const call = prepareCall(plugin, request);
  const warmStart = nowNs();
  const warmUntil = warmStart + BigInt(Math.round(plan.warmupMs * 1e6));
  let warmups = 0;
  do {
    call.run();
    warmups++;
  } while (nowNs() < warmUntil);
  const batch = Math.max(1, Math.round(SAMPLE_NS / (Number(nowNs() - warmStart) / warmups)));
  const host: number[] = [];
  const inPlugin: number[] = [];
  const start = nowNs();
  const minTimeNs = plan.minTimeMs * 1e6;
  while (host.length < Math.max(1, plan.maxSamples) && (host.length < plan.minSamples || Number(nowNs() - start) < minTimeNs)) {
    const before = nowNs();
    call.runBatch(batch);
    host.push(Number(nowNs() - before) / batch);
    inPlugin.push(call.timeInPlugin(0, batch).reduce((a, b) => a + b, 0) / batch);
  }
  return { hostNs: Float64Array.from(host), inPluginNs: Float64Array.from(inPlugin), callsPerSample: batch };
}

function serveKernels(plugin: NativePlugin): Record<string, (params: Params) => unknown> {
  return {
    kernel: (params) => {
      const request = kernelRequestFromWire(params);
      plugin.run(request.op, request.encoding, request.inputs.map(tensorArg), request.outputs.map(tensorArg), JSON.stringify(request.attrs));
      return kernelOutputsToWire(request);
    },
    kernel_time: (params) => kernelTimingToWire(timeKernel(plugin, kernelRequestFromWire(params), timingPlanFromWire(params))),
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
    // The addon refuses an ABI version it does not host (1 and 2) when it loads the plugin.
    const info = plugin.info();
    methods = serveKernels(plugin);
    hello = {
      engine: `${info.name} ${info.version} on ${info.device} (plugin ABI v${info.abiVersion})`,
      capabilities: Object.keys(methods), kernel_ops: info.ops, settings: { device: info.device },
    };
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
      // The addon marks an unregistered pair (and a v1 kernel's BB_UNSUPPORTED_TYPE): the protocol's "unsupported", that case SKIPPED.
      const unsupported = (error as { unsupported?: boolean }).unsupported === true;
      send({ id: request.id, error: { message: (error as Error).message, ...(unsupported ? { unsupported: true } : {}) } });
    }
  });
}

// Started by openPluginSut as: node plugin-process.js LIBRARY
if (process.argv[1]?.endsWith("plugin-process.js")) main(process.argv[2] ?? "");
