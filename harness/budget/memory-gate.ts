import type { BudgetCategory } from "./arithmetic.js";
import { buffersByDevice, type LlamaCppBufferLine, type LlamaCppBuffers } from "./llamacpp-buffer-log.js";

/**
 * The categories an engine can report its allocations by: the budget's, merged where one
 * allocation holds several (llama.cpp's model buffer holds packed weights, any twins and the
 * embedding/head alike; a decode transient lives in the same scratch as the activations).
 */
export const MEASURED_GROUPS = {
  weights: ["weights_packed", "twins", "embedding_head"],
  kv_cache: ["kv_cache"],
  recurrent_state: ["recurrent_state"],
  activations: ["activations", "decode_transient"],
  trace_region: ["trace_region"],
} as const satisfies Record<string, readonly BudgetCategory[]>;
export type MeasuredGroup = keyof typeof MEASURED_GROUPS;
export const GROUPS = Object.keys(MEASURED_GROUPS) as MeasuredGroup[];

/** One device's allocations as an engine reports them: steady (held between requests) and peak (the most held at once). */
export interface DeviceAllocations {
  readonly device: string;
  readonly steady: Readonly<Partial<Record<MeasuredGroup, number>>>;
  readonly peak: Readonly<Partial<Record<MeasuredGroup, number>>>;
}

/** One device's group as the gate held it: what was reported (undefined: not reported) and what the budget predicts. */
export interface GroupRow {
  readonly device: string;
  readonly group: MeasuredGroup;
  readonly steady: number | undefined;
  readonly peak: number | undefined;
  readonly predictedSteady: number;
  readonly predictedPeak: number;
  /** Steady or peak above predicted × (1 + tolerance). */
  readonly over: boolean;
}

export type MemoryGateResult =
  | { readonly status: "not_measured"; readonly summary: string }
  | {
    readonly status: "pass" | "fail"; readonly summary: string; readonly rows: readonly GroupRow[];
    readonly over: readonly { readonly device: string; readonly group: MeasuredGroup; readonly kind: "steady" | "peak"; readonly predicted: number; readonly measured: number }[];
    /** Devices whose reported peak, every group together, exceeds the usable DRAM (DRAM less headroom). */
    readonly overDevice: readonly { readonly device: string; readonly peak: number; readonly usable: number }[];
  };

/** llama.cpp's buffers are allocated once and held: steady and peak are the same. */
export function llamaCppAllocations(buffers: LlamaCppBuffers, device = "CPU"): DeviceAllocations {
  const groups = { weights: buffers.model, kv_cache: buffers.kv, recurrent_state: buffers.recurrent, activations: buffers.compute + buffers.output, trace_region: 0 };
  return { device, steady: groups, peak: groups };
}

/** llama.cpp's buffer lines as allocations per device: each backend's buffers counted where their memory is (backendDevice). */
export function llamaCppDeviceAllocations(lines: readonly LlamaCppBufferLine[]): DeviceAllocations[] {
  return [...buffersByDevice(lines)].map(([device, buffers]) => llamaCppAllocations(buffers, device));
}

/**
 * Predicted bytes per group: peak counts every category, steady leaves out the per-call decode
 * transient (it must be freed when the call returns: one still held afterwards is a leak).
 */
export function predictedGroups(perDevice: Readonly<Record<BudgetCategory, number>>): { steady: Record<MeasuredGroup, number>; peak: Record<MeasuredGroup, number> } {
  const sum = (group: MeasuredGroup, leave: readonly BudgetCategory[]): number =>
    (MEASURED_GROUPS[group] as readonly BudgetCategory[]).filter((c) => !leave.includes(c)).reduce((total, c) => total + perDevice[c], 0);
  return {
    steady: Object.fromEntries(GROUPS.map((g) => [g, sum(g, ["decode_transient"])])) as Record<MeasuredGroup, number>,
    peak: Object.fromEntries(GROUPS.map((g) => [g, sum(g, [])])) as Record<MeasuredGroup, number>,
  };
}

const mib = (bytes: number): string => `${(bytes / 1024 ** 2).toFixed(2)} MiB`;

/**
 * Measured ≤ predicted × (1 + tolerance), per device, group, steady and peak; and, given the
 * device's usable DRAM, each device's peak over every group within it. A runner that reports
 * nothing is "not measured", never a pass; a group it leaves out is not a zero either — it is
 * skipped by name in the summary.
 */
export function memoryGate(perDevice: Readonly<Record<BudgetCategory, number>>, reported: readonly DeviceAllocations[] | undefined, tolerance: number, usablePerDevice?: number): MemoryGateResult {
  if (reported === undefined || reported.length === 0) return { status: "not_measured", summary: "memory: not measured (the runner reports no allocations)" };
  const predicted = predictedGroups(perDevice);
  const over: Extract<MemoryGateResult, { status: "pass" | "fail" }>["over"][number][] = [];
  const overDevice: Extract<MemoryGateResult, { status: "pass" | "fail" }>["overDevice"][number][] = [];
  const rows: GroupRow[] = [];
  const unreported = new Set<string>();
  for (const device of reported) {
    for (const kind of ["steady", "peak"] as const) {
      for (const group of GROUPS) {
        const measured = device[kind][group];
        if (measured === undefined) { unreported.add(`${device.device} ${kind} ${group}`); continue; }
        if (measured > predicted[kind][group] * (1 + tolerance)) over.push({ device: device.device, group, kind, predicted: predicted[kind][group], measured });
      }
    }
    for (const group of GROUPS) {
      rows.push({
        device: device.device, group, steady: device.steady[group], peak: device.peak[group], predictedSteady: predicted.steady[group], predictedPeak: predicted.peak[group],
        over: over.some((o) => o.device === device.device && o.group === group),
      });
    }
    const peak = GROUPS.reduce((sum, group) => sum + (device.peak[group] ?? 0), 0);
    if (usablePerDevice !== undefined && peak > usablePerDevice) overDevice.push({ device: device.device, peak, usable: usablePerDevice });
  }
  const named = [
    ...over.map((o) => `${o.device} ${o.group} (${o.kind}) ${mib(o.measured)} > predicted ${mib(o.predicted)} (+${mib(o.measured - o.predicted)})`),
    ...overDevice.map((o) => `${o.device} total (peak) ${mib(o.peak)} > usable ${mib(o.usable)} (+${mib(o.peak - o.usable)})`),
  ];
  const skipped = unreported.size === 0 ? "" : `; not reported: ${[...unreported].join(", ")}`;
  return named.length === 0
    ? { status: "pass", summary: `memory: every reported group within ${(tolerance * 100).toFixed(0)}% of the budget${skipped}`, over, overDevice, rows }
    : { status: "fail", summary: `memory: FAIL ${named.join("; ")}${skipped}`, over, overDevice, rows };
}
