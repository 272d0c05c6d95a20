import { chatTemplateLlamaServerCheck, chatTemplateServerCheck } from "./chat-template/template-sides.js";
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
import { perplexityCheck } from "./perplexity/perplexity.js";
import { reuseEfficacyCheck } from "./reuse/efficacy.js";
import { reusePrefillCheck } from "./reuse/prefill.js";
import { reuseCheck } from "./reuse/reuse.js";
import { samplingIdentityCheck } from "./sampling/identity.js";
import { parametersCheck } from "./sampling/parameters.js";
import { samplingFitCheck } from "./sampling/sampling-fit.js";
import { seedsCheck } from "./sampling/seeds.js";
import { speculativeGreedyCheck } from "./speculative/speculative-greedy.js";
import { detokenizeRoundtripCheck } from "./tokenizer/detokenize-roundtrip.js";
import { tokenizerParityCheck } from "./tokenizer/tokenizer-parity.js";

/**
 * Every check module (./check-module.ts), each naming the suite kind whose arms run it; an arm runs
 * its kind's checks in this order (checksOf). Adding a check is one module and one line here. (A
 * kernel suite's checks are its ops: one per op of kernels/ops/registry.ts its cases name, and
 * kernel_time.)
 */
const CHECKS = [
  // identity first: every other verdict of the arm is about the artifact it names. greedy_parity
  // before determinism, batch_invariance and capture_parity, which reuse its answers alone.
  identityCheck, tokenizerCheck, greedyParityCheck, teacherForcedCheck, distributionCheck, determinismCheck, batchInvarianceCheck, captureParityCheck, captureStableCheck,
  // identity first here too: the grid is about the artifact it names.
  niahIdentityCheck, needleCheck,
  conformanceCheck,
  // reuse before reuse_efficacy, which reads the measurements its scenarios made.
  reuseCheck, reuseEfficacyCheck, reusePrefillCheck,
  speculativeGreedyCheck,
  tokenizerParityCheck, detokenizeRoundtripCheck,
  perplexityCheck,
  // our server first, then llama-server.
  chatTemplateServerCheck, chatTemplateLlamaServerCheck,
  // the fit first: its summary is the arm's line.
  samplingIdentityCheck, samplingFitCheck, seedsCheck, parametersCheck,
] as const;

type RegisteredCheck = (typeof CHECKS)[number];

/** The check modules a suite kind's arms run, in order. */
export function checksOf<Kind extends RegisteredCheck["kind"]>(kind: Kind): Extract<RegisteredCheck, { readonly kind: Kind }>[] {
  return CHECKS.filter((check): check is Extract<RegisteredCheck, { readonly kind: Kind }> => check.kind === kind);
}
