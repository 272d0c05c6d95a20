import type { EdgeGeneration } from "../../kernels/edge-cases.js";
import type { KernelCaseSpec } from "../../kernels/ops/registry.js";
import type { GateLevel, SuiteFile } from "./parity-suite.js";

/** A kernel arm names a C plugin or a runner command; `{bench}` becomes the harness's directory in either. */
export interface KernelArm {
  readonly label: string;
  /** A shared library implementing native/include/bringup_bench_plugin.h. */
  readonly plugin?: string;
  /** Or a command speaking the runner protocol with the `kernel` method. */
  readonly runner?: readonly string[];
  readonly gate: GateLevel;
  readonly why?: string;
}

/** A kernel suite (schema: suites/schema/kernels.schema.json; each case against its op's schema in kernels/ops/). */
export interface KernelSuite extends SuiteFile<"kernels", KernelArm> {
  readonly cases: readonly KernelCaseSpec[];
  /** Append every op's generated edge cases (kernels/edge-cases.ts) after the written ones. */
  readonly edges?: EdgeGeneration;
  /** Time every case (as `bench run --time` does). */
  readonly time?: boolean;
}
