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

/**
 * Times a prepared call as the harness sees it (one argument-less N-API call per sample, each
 * timed alone), then the same number of calls in the plugin's own C loop: the difference is the
 * harness's overhead (README, "Kernel timing").
 */
function timeKernel(plugin: NativePlugin, request: KernelRequest, plan: KernelTimingPlan): KernelTiming {
  const call = prepareCall(plugin, request);
  const warmUntil = nowNs() + BigInt(Math.round(plan.warmupMs * 1e6));
  let warmups = 0;
  do {
    call.run();
    warmups++;
  } while (nowNs() < warmUntil);
  const samples: number[] = [];
  const start = nowNs();
  const minTimeNs = plan.minTimeMs * 1e6;
  while (samples.length < Math.max(1, plan.maxSamples) && (samples.length < plan.minSamples || Number(nowNs() - start) < minTimeNs)) {
    const before = nowNs();
    call.run();
    samples.push(Number(nowNs() - before));
  }
  return { hostNs: Float64Array.from(samples), inPluginNs: call.timeInPlugin(warmups, samples.length) };
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
    const info = plugin.info();
    if (info.abiVersion !== 1 && info.abiVersion !== host.abiVersion) {
      throw new Error(`the plugin was built for ABI version ${info.abiVersion}; this harness hosts versions 1 and ${host.abiVersion} (rebuild it against native/include/bringup_bench_plugin.h)`);
    }
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
      send({ id: request.id, error: { message: (error as Error).message } });
    }
  });
}

// Started by openPluginSut as: node plugin-process.js LIBRARY
if (process.argv[1]?.endsWith("plugin-process.js")) main(process.argv[2] ?? "");
