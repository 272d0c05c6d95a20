import { conformanceCheck } from "./conformance/conformance.js";
import { niahIdentityCheck } from "./niah/identity.js";
import { needleCheck } from "./niah/needle.js";
import { batchInvarianceCheck } from "./parity/batch-invariance.js";
import { captureParityCheck } from "./parity/capture-parity.js";
import { captureStableCheck } from "./parity/capture-stable.js";
import { determinismCheck } from "./parity/determinism.js";
import { distributionCheck } from "./parity/distribution.js";
import { greedyParityCheck } from "./parity/greedy-parity.js";
import { identityCheck } from "./parity/identity.js";
import { teacherForcedCheck } from "./parity/teacher-forced.js";
import { tokenizerCheck } from "./parity/tokenizer.js";

/**
 * Each suite kind's checks as modules (./check-module.ts), in the order an arm runs them. Adding a
 * check is one module and one line here. (A kernel suite's checks are its ops: one per op of
 * kernels/ops/registry.ts its cases name, and kernel_time.)
 */
export const CHECKS_BY_KIND = {
  // identity first: every other verdict of the arm is about the artifact it names. greedy_parity
  // before determinism, batch_invariance and capture_parity, which reuse its answers alone.
  parity: [identityCheck, tokenizerCheck, greedyParityCheck, teacherForcedCheck, distributionCheck, determinismCheck, batchInvarianceCheck, captureParityCheck, captureStableCheck],
  // identity first here too: the grid is about the artifact it names.
  niah: [niahIdentityCheck, needleCheck],
  conformance: [conformanceCheck],
} as const;
