import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { BenchError } from "../errors.js";
import { assertMatchesSchema, readJsonFile } from "../io/json-schema.js";
import { PACKAGE_ROOT } from "../paths.js";
import type { TensorClass } from "./model-shape.js";

/** How one class of tensors lives on the device. */
export interface ClassResidency {
  /** The GGUF encoding kept as is (packed blocks / words). */
  readonly packed: boolean;
  /** A dequantized copy kept beside (or instead of) the packed one, at twin_bytes_per_element. */
  readonly twin: boolean;
  /** Whole on every device, or split evenly across the mesh. */
  readonly placement: "replicated" | "sharded";
}

/**
 * Where each byte of a model goes on a device: per tensor class, the KV and recurrent state, the
 * per-call decode of packed weights (its chunk and transient cost), and the captured command stream.
 * Data, not code: budgets/policies/*.json, checked by budgets/policy.schema.json.
 */
export interface ResidencyPolicy {
  readonly name: string;
  readonly description: string;
  readonly classes: Readonly<Record<TensorClass, ClassResidency>>;
  readonly twin_bytes_per_element: number;
  /** Packed weights without a twin are decoded per call in chunks; absent: the engine reads packed blocks directly (llama.cpp's CPU kernels). */
  readonly decode?: {
    /** Peak bytes live per decoded element (the f32 plane plus its intermediates). */
    readonly transient_bytes_per_element: number;
    /** Cap on one chunk's f32 plane: chunk rows = cap / (4 B × row length), a whole weight when it fits. */
    readonly chunk_plane_bytes: number;
  };
  /** Captured command stream per weight decoded per call (a "weight chain"), when the engine replays a captured graph. */
  readonly trace_bytes_per_weight_chain: number;
  readonly kv_bytes_per_element: number;
  readonly recurrent_bytes_per_element: number;
  readonly kv_placement: "replicated" | "sharded";
}

/** A device, or a mesh of identical ones. */
export interface DeviceDescription {
  readonly name: string;
  readonly description: string;
  readonly dram_bytes_per_device: number;
  /** Rows × columns of devices; [1, 1] for one. */
  readonly mesh: readonly [number, number];
  /** A fixed region carved out at open, or one sized by what each capture demands. */
  readonly trace_region: { readonly policy: "fixed"; readonly bytes: number } | { readonly policy: "dynamic" } | { readonly policy: "none" };
  /** Share of DRAM the budget must leave free (allocator fragmentation, runtime, firmware). */
  readonly headroom_fraction: number;
}

export const BUDGETS_DIR = join(PACKAGE_ROOT, "budgets");

export function loadPolicy(path: string): ResidencyPolicy {
  return assertMatchesSchema<ResidencyPolicy>(readJsonFile(path), join(BUDGETS_DIR, "policy.schema.json"), path);
}

export function loadDevice(path: string): DeviceDescription {
  return assertMatchesSchema<DeviceDescription>(readJsonFile(path), join(BUDGETS_DIR, "device.schema.json"), path);
}

/** A shipped policy or device by bare name (budgets/policies/NAME.json), or a path to one. */
export function budgetFile(kind: "policies" | "devices", reference: string): string {
  if (reference.endsWith(".json") || reference.includes("/")) return reference;
  const path = join(BUDGETS_DIR, kind, `${reference}.json`);
  if (!existsSync(path)) {
    const shipped = readdirSync(join(BUDGETS_DIR, kind)).filter((name) => name.endsWith(".json")).map((name) => name.slice(0, -".json".length));
    throw new BenchError(`no shipped ${kind === "policies" ? "policy" : "device"} named "${reference}"`, {
      field: kind === "policies" ? "--policy" : "--device", fix: `use one of ${shipped.join(", ")}, or the path of your own .json`,
    });
  }
  return path;
}
