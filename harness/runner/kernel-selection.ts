import { BenchError } from "../errors.js";
import { KERNEL_OPS } from "../../kernels/ops/registry.js";
import { didYouMean } from "../registry/did-you-mean.js";
import type { KernelSuite } from "../suites/kernel-suite.js";

/** What `bench run` was asked that concerns kernel suites. */
export interface KernelSelection {
  /** The suites were named with --suite (not the default battery). */
  readonly suitesNamed: boolean;
  readonly runner: readonly string[] | undefined;
  readonly plugin: string | undefined;
  readonly kernelOps: readonly string[] | undefined;
}

/**
 * Refuses, before any work, what a kernel suite would otherwise ignore: `--runner` for a named
 * kernel suite whose arms are plugins (a runner replaces model arms; `--plugin` swaps a plugin),
 * and an `--op` that no kernel suite of the run has a case of (naming the ops there are).
 */
export function assertKernelSelection(kernelSuites: readonly KernelSuite[], selection: KernelSelection): void {
  if (selection.runner !== undefined && selection.plugin === undefined && selection.suitesNamed) {
    for (const suite of kernelSuites) {
      const plugin = suite.arms.find((arm) => "plugin" in arm && arm.plugin !== undefined);
      if (plugin !== undefined) throw new BenchError(`--runner cannot replace kernel suite ${suite.name}'s plugin arm "${plugin.label}"`, { field: "--runner", fix: "swap the plugin with --plugin LIBRARY, or name a runner arm in the suite (arms[].runner)" });
    }
  }
  for (const op of selection.kernelOps ?? []) {
    const present = [...new Set(kernelSuites.flatMap((s) => s.cases.map((c) => c.op)))];
    if (!present.includes(op)) {
      const known = KERNEL_OPS.has(op) ? `no kernel suite of this run has a ${op} case` : `unknown kernel op "${op}"${didYouMean(op, [...KERNEL_OPS.keys()])}`;
      throw new BenchError(known, { field: "--op", fix: `use one of ${present.join(", ") || "the ops of a kernel suite (run one with --suite)"}` });
    }
  }
}
