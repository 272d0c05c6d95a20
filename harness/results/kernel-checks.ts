import { KERNEL_OPS } from "../../kernels/ops/registry.js";
import type { KernelCheckName } from "./types.js";

/** Whether a cell's or a verdict's check is a kernel suite's: an op of the registry, or the timing pass. */
export function isKernelCheck(check: string): check is KernelCheckName {
  return check === "kernel_time" || KERNEL_OPS.has(check);
}
