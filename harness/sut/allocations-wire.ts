import { GROUPS, type DeviceAllocations, type MeasuredGroup } from "../budget/memory-gate.js";
import type { AllocationReport } from "./types.js";

/**
 * An allocations report on the wire, the same in the runner protocol's `allocations` answer and our
 * server's GET /allocations (docs/runner-protocol.md): bytes per group, steady and peak, per device,
 * and the shape they were allocated for.
 */
export interface AllocationsWire {
  readonly devices: readonly { readonly device: string; readonly steady: Partial<Record<MeasuredGroup, number>>; readonly peak: Partial<Record<MeasuredGroup, number>> }[];
  readonly shape: { readonly context_size: number; readonly slots: number; readonly batch_size: number; readonly kv_bytes_per_element?: number };
}

export function allocationsToWire(report: AllocationReport): AllocationsWire {
  const { contextPerSlot, slots, batchTokens, kvBytesPerElement } = report.shape;
  return {
    devices: report.devices.map((d) => ({ device: d.device, steady: { ...d.steady }, peak: { ...d.peak } })),
    shape: { context_size: contextPerSlot, slots, batch_size: batchTokens, ...(kvBytesPerElement === undefined ? {} : { kv_bytes_per_element: kvBytesPerElement }) },
  };
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * Reads a report, every field checked and named when wrong (`who` says whose answer it is, e.g.
 * "runner allocations"): a group name the gate does not know is refused, since a misspelt group
 * would otherwise read as one not reported.
 */
export function allocationsFromWire(result: unknown, who: string): AllocationReport {
  const wrong = (field: string, what: string, value: unknown) => new Error(`${who}: result.${field} must be ${what} (got ${JSON.stringify(value)?.slice(0, 80) ?? "nothing"})`);
  const body = isObject(result) ? result : {};
  if (!Array.isArray(body.devices)) throw wrong("devices", "a list of {device, steady, peak}", body.devices);
  const devices = body.devices.map((entry: unknown, i): DeviceAllocations => {
    const d = isObject(entry) ? entry : {};
    if (typeof d.device !== "string" || d.device === "") throw wrong(`devices[${i}].device`, "a string naming the device", d.device);
    const groups = (kind: "steady" | "peak") => {
      const bytes = d[kind];
      if (!isObject(bytes)) throw wrong(`devices[${i}].${kind}`, `an object of bytes by group (${GROUPS.join(", ")})`, bytes);
      for (const [group, value] of Object.entries(bytes)) {
        if (!(GROUPS as readonly string[]).includes(group)) throw wrong(`devices[${i}].${kind}.${group}`, `one of the groups ${GROUPS.join(", ")}`, group);
        if (!Number.isInteger(value) || (value as number) < 0) throw wrong(`devices[${i}].${kind}.${group}`, "a whole number of bytes", value);
      }
      return bytes as Partial<Record<MeasuredGroup, number>>;
    };
    return { device: d.device, steady: groups("steady"), peak: groups("peak") };
  });
  const shape = isObject(body.shape) ? body.shape : undefined;
  if (shape === undefined) throw wrong("shape", "{context_size, slots, batch_size}: what the allocations were made for", body.shape);
  for (const field of ["context_size", "slots", "batch_size"]) {
    if (!Number.isInteger(shape[field]) || (shape[field] as number) < 1) throw wrong(`shape.${field}`, "a whole number of at least 1", shape[field]);
  }
  const kv = shape.kv_bytes_per_element;
  if (kv !== undefined && !(typeof kv === "number" && kv > 0)) throw wrong("shape.kv_bytes_per_element", "a positive number", kv);
  return {
    devices,
    shape: { contextPerSlot: shape.context_size as number, slots: shape.slots as number, batchTokens: shape.batch_size as number, ...(kv === undefined ? {} : { kvBytesPerElement: kv }) },
  };
}
