import { suiteArgument } from "../../suites/load.js";
import type { KernelArm, KernelSuite } from "../../suites/kernel-suite.js";
import { openPluginSut } from "../../sut/plugin.js";
import { openStdioSut } from "../../sut/stdio.js";
import { armsByLabel, selectIndices } from "../arm-selection.js";
import { DEFAULT_TIMING_PLAN, runKernelArm } from "../kernel-runner.js";
import { assertKernelSelection } from "../kernel-selection.js";
import { fillPlaceholders, type SutContext } from "../open-sut.js";
import type { SuiteKind } from "./kind.js";

/** The one arm `--plugin` gives a kernel suite. */
const PLUGIN_ARM = "plugin";

/** Owned kernels against the float64 references: each arm a plugin (shared library) or a runner with the `kernel` method. */
export const kernelsKind: SuiteKind<KernelSuite, KernelArm> = {
  // --model and --runner name model SUTs: a kernel suite keeps its arms, and --plugin swaps them for one.
  arms: (suite, options) => (options.plugin !== undefined ? [{ label: PLUGIN_ARM, plugin: options.plugin, gate: "required" }] : armsByLabel(suite, options)),
  checkSelection: assertKernelSelection,
  // Timing (--time, or a suite's "time") measures the machine: such a suite runs alone.
  sharesMachine: (suite, options) => !options.time && suite.time !== true,
  async run(suite, arms, battery) {
    const { options } = battery;
    const cases = selectIndices(suite.cases.length, options.kernelCases, "kernel case", "--case", suite.path).map((index) => ({ index, spec: suite.cases[index] }))
      .filter(({ spec }) => options.kernelOps === undefined || options.kernelOps.includes(spec.op));
    // --op names an op another kernel suite of the run has (checkSelection made sure): this one has nothing to run.
    if (cases.length === 0) {
      await battery.emit({ kind: "notice", message: `note: ${suite.name} has no case of --op ${options.kernelOps?.join(", ")}: its arms are not opened` });
      return;
    }
    const open = (arm: KernelArm, context: SutContext) => arm.runner !== undefined
      ? openStdioSut(arm.runner.map((part) => fillPlaceholders(part)), { label: arm.label, ...context })
      : openPluginSut(fillPlaceholders(arm.plugin ?? ""), arm.label, context);
    await battery.legs(suite, arms, open, (arm, sut, _opened, signal) => runKernelArm({
      suiteName: suite.name, arm, sut, cases, emit: battery.emit, signal, reproduce: battery.reproduce(suite, arm),
      timing: options.time || suite.time === true ? DEFAULT_TIMING_PLAN : undefined,
    }));
  },
  reproduce: (suite, arm, options) => `bench run --suite ${suiteArgument(suite)} ${options.plugin !== undefined ? `--plugin ${JSON.stringify(options.plugin)}` : `--arm ${JSON.stringify(arm.label)}`}`,
};
