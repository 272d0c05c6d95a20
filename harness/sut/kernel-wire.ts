import { DTYPES, isDtype, tensorBytes, type KernelTensor } from "../../kernels/ops/tensor.js";
import { ACCUMULATION_UNIT_ROUNDOFF, type KernelPair, type KernelRequest, type KernelTiming, type KernelTimingPlan } from "./types.js";

/**
 * The runner protocol's `kernel` and `kernel_time` methods (docs/runner-protocol.md): any op
 * travels as its name, its encoding, tensor descriptors ({name, dtype, shape, data: base64 of the
 * little-endian bytes}) and its attributes, so a Python kernel answers exactly what a C plugin does.
 */
interface WireTensor {
  readonly name: string;
  readonly dtype: string;
  readonly shape: readonly number[];
  readonly data: string;
}

export interface WireKernelRequest {
  readonly op: string;
  readonly encoding: string;
  readonly attrs: Readonly<Record<string, number | string | boolean>>;
  readonly inputs: readonly WireTensor[];
  readonly outputs: readonly WireTensor[];
}

const toWire = (t: KernelTensor): WireTensor => ({ name: t.name, dtype: t.dtype, shape: t.shape, data: Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).toString("base64") });

/** Bytes of base64 text, in a fresh (aligned) buffer. */
export function bytesFromBase64(text: string): Uint8Array {
  return Uint8Array.from(Buffer.from(text, "base64"));
}

export function kernelRequestToWire(request: KernelRequest): WireKernelRequest {
  return { op: request.op, encoding: request.encoding, attrs: request.attrs, inputs: request.inputs.map(toWire), outputs: request.outputs.map(toWire) };
}

export function timingPlanToWire(plan: KernelTimingPlan) {
  return { warmup_ms: plan.warmupMs, min_samples: plan.minSamples, min_time_ms: plan.minTimeMs, max_samples: plan.maxSamples };
}

/** A descriptor from the wire, checked: a known dtype, whole numbers, and exactly the bytes its shape takes. */
function tensorFromWire(value: unknown, where: string): KernelTensor {
  const t = value as Partial<WireTensor> | null;
  if (typeof t?.name !== "string" || typeof t.dtype !== "string" || !isDtype(t.dtype) || !Array.isArray(t.shape) || !t.shape.every((d) => Number.isInteger(d) && d >= 0) || typeof t.data !== "string") {
    throw new Error(`${where} must be {name, dtype (one of ${Object.keys(DTYPES).join(", ")}), shape: [whole numbers], data: base64}`);
  }
  const data = bytesFromBase64(t.data);
  const expected = tensorBytes(t.dtype, t.shape);
  if (data.byteLength !== expected) throw new Error(`${where} (${t.name}): ${data.byteLength} bytes for a ${t.dtype} tensor of shape [${t.shape.join(", ")}] (expected ${expected})`);
  return { name: t.name, dtype: t.dtype, shape: t.shape, data };
}

export function kernelRequestFromWire(params: unknown): KernelRequest {
  const p = params as Partial<WireKernelRequest> | null;
  if (typeof p?.op !== "string" || typeof p.encoding !== "string" || !Array.isArray(p.inputs) || !Array.isArray(p.outputs) || typeof p.attrs !== "object" || p.attrs === null) {
    throw new Error("kernel: params must be {op, encoding, attrs, inputs: [...], outputs: [...]}");
  }
  return { op: p.op, encoding: p.encoding, attrs: p.attrs, inputs: p.inputs.map((t, i) => tensorFromWire(t, `inputs[${i}]`)), outputs: p.outputs.map((t, i) => tensorFromWire(t, `outputs[${i}]`)) };
}

export function timingPlanFromWire(params: unknown): KernelTimingPlan {
  const t = (params as { timing?: Record<string, unknown> } | null)?.timing;
  const read = (name: string) => {
    const value = t?.[name];
    if (typeof value !== "number" || !(value >= 0)) throw new Error(`kernel_time: params.timing.${name} must be a number ≥ 0`);
    return value;
  };
  return { warmupMs: read("warmup_ms"), minSamples: read("min_samples"), minTimeMs: read("min_time_ms"), maxSamples: read("max_samples") };
}

/**
 * A `kernel` result's outputs with their base64 decoded; whether they answer the request (count,
 * names, bytes) is checked with every other answer, in answer-shape.ts.
 */
export function kernelOutputsFromWire(result: unknown): unknown {
  const outputs = (result as { outputs?: unknown } | null)?.outputs;
  if (!Array.isArray(outputs)) return outputs;
  return outputs.map((entry: unknown) => {
    const got = entry as { name?: unknown; data?: unknown } | null;
    return typeof got?.data === "string" ? { name: got.name, data: bytesFromBase64(got.data) } : entry;
  });
}

export function kernelOutputsToWire(request: KernelRequest): { outputs: { name: string; data: string }[] } {
  return { outputs: request.outputs.map((o) => ({ name: o.name, data: toWire(o).data })) };
}

function float64FromBase64(text: unknown, what: string): Float64Array {
  if (typeof text !== "string") throw new Error(`kernel_time: result.${what} must be base64 of little-endian float64 nanoseconds`);
  const bytes = bytesFromBase64(text);
  if (bytes.byteLength % 8 !== 0 || bytes.byteLength === 0) throw new Error(`kernel_time: result.${what} must hold at least one float64`);
  return new Float64Array(bytes.buffer);
}

export function kernelTimingToWire(timing: KernelTiming) {
  const encode = (ns: Float64Array) => Buffer.from(ns.buffer, ns.byteOffset, ns.byteLength).toString("base64");
  return { host_ns: encode(timing.hostNs), calls_per_sample: timing.callsPerSample, ...(timing.inPluginNs === undefined ? {} : { in_plugin_ns: encode(timing.inPluginNs) }) };
}

export function kernelTimingFromWire(result: unknown): KernelTiming {
  const r = result as { host_ns?: unknown; in_plugin_ns?: unknown; calls_per_sample?: unknown } | null;
  const calls = r?.calls_per_sample ?? 1;
  if (!Number.isInteger(calls) || (calls as number) < 1) throw new Error("kernel_time: result.calls_per_sample must be a whole number ≥ 1 (the calls each sample averages)");
  return {
    hostNs: float64FromBase64(r?.host_ns, "host_ns"), callsPerSample: calls as number,
    ...(r?.in_plugin_ns === undefined ? {} : { inPluginNs: float64FromBase64(r.in_plugin_ns, "in_plugin_ns") }),
  };
}

/** The hello's `kernel_ops`: the (op, encoding) pairs a runner registers. */
export function kernelPairsFromHello(value: unknown): KernelPair[] {
  const valid = (p: Partial<KernelPair> | null) => typeof p?.op === "string" && typeof p.encoding === "string" && (p.accumulation === undefined || Object.hasOwn(ACCUMULATION_UNIT_ROUNDOFF, p.accumulation));
  if (!Array.isArray(value) || !value.every(valid)) {
    throw new Error(`the hello's kernel_ops must list {op, encoding, accumulation?: ${Object.keys(ACCUMULATION_UNIT_ROUNDOFF).join(" | ")}} pairs (got ${JSON.stringify(value)?.slice(0, 80)})`);
  }
  return value.map((p: KernelPair) => ({ op: p.op, encoding: p.encoding, ...(p.accumulation === undefined ? {} : { accumulation: p.accumulation }) }));
}
