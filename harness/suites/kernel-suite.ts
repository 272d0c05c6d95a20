import type { GateLevel, SuiteFile } from "./parity-suite.js";

/** One kernel case: the op, the tensor type, the shape, and the seed its inputs are drawn from. */
export type KernelCase =
  | { readonly op: "dequantize"; readonly type: KernelType; readonly values: number; readonly seed: number }
  | { readonly op: "matvec"; readonly type: KernelType; readonly rows: number; readonly cols: number; readonly seed: number };

export type KernelType = "F32" | "Q8_0" | "Q4_K" | "Q5_K" | "Q6_K";

/** A kernel arm names a C plugin or a runner command; `{bench}` becomes the harness's directory in either. */
export interface KernelArm {
  readonly label: string;
  /** A shared library implementing native/include/bringup_bench_plugin.h. */
  readonly plugin?: string;
  /** Or a command speaking the runner protocol with `dequantize` / `matvec` methods. */
  readonly runner?: readonly string[];
  readonly gate: GateLevel;
  readonly why?: string;
}

/** A kernel suite (schema: suites/schema/kernels.schema.json): owned kernels against CPU references. */
export interface KernelSuite extends SuiteFile<"kernels", KernelArm> {
  readonly cases: readonly KernelCase[];
}
