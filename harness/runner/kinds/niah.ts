import { BenchError } from "../../errors.js";
import { resolveNiahSuite, type NiahSuite } from "../../suites/niah-suite.js";
import type { SuiteArm } from "../../suites/parity-suite.js";
import { modelArms } from "../arm-selection.js";
import { modelTheArmNames } from "../identity.js";
import { needleCases, runNiahArm } from "../niah-runner.js";
import { armSettings, type SutContext } from "../open-sut.js";
import type { SuiteKind } from "./kind.js";

/** Needle in a haystack: each case's long prompt, the needle's recall scored. */
export const niahKind: SuiteKind<NiahSuite, SuiteArm> = {
  arms: modelArms,
  // A needle is found or not; the case's time is reported, never gated.
  sharesMachine: () => true,
  async run(suite, arms, battery) {
    const { options } = battery;
    const spec = resolveNiahSuite(suite);
    const cases = needleCases(spec, options.niahCases);
    if (cases.length === 0) throw new BenchError(`no needle case matches ${options.niahCases?.join(", ")}`, { file: suite.path, field: "--niah-case", fix: "use L:depth:trial with values from the suite, e.g. 4000:0.5:0" });
    const open = (arm: SuiteArm, context: SutContext) => options.openSut(arm, armSettings(arm, options.settings, 1), context);
    await battery.legs(suite, arms, open, async (arm, sut, _opened, signal) => runNiahArm({
      suiteName: suite.name, spec, cases, arm, sut, emit: battery.emit, signal, reproduce: battery.reproduce(suite, arm), expectedModel: await modelTheArmNames(arm),
    }));
  },
};
