import type { KernelCheckName } from "../../results/types.js";
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
 * check is one module and one line here; its name joins CheckName by itself. (A kernel suite's
 * checks are its ops: one per op of kernels/ops/registry.ts its cases name, and kernel_time.)
 */
export const CHECKS_BY_KIND = {
  // identity first: every other verdict of the arm is about the artifact it names. greedy_parity
  // before determinism, batch_invariance and capture_parity, which reuse its answers alone.
  parity: [identityCheck, tokenizerCheck, greedyParityCheck, teacherForcedCheck, distributionCheck, determinismCheck, batchInvarianceCheck, captureParityCheck, captureStableCheck],
  // identity first here too: the grid is about the artifact it names.
  niah: [niahIdentityCheck, needleCheck],
  conformance: [conformanceCheck],
} as const;

/** The checks a suite kind's arm runs as modules. */
export type ModuleCheckName = (typeof CHECKS_BY_KIND)[keyof typeof CHECKS_BY_KIND][number]["name"];

/**
 * Checks that are no module of a kind's list: the battery's own (trace_demand after every leg,
 * arm for a leg that could not run), and bench load's.
 */
type BatteryCheckName = "trace_demand" | "arm" | "load" | "parity_under_load";

/** The state-reuse, speculative, tokenizer, chat-template and perplexity kinds' checks, still run inline by their runners (reuse-runner.ts, speculative-runner.ts, tokenizer-runner.ts, chat-template-runner.ts, perplexity-runner.ts). */
type InlineCheckName = "reuse" | "reuse_efficacy" | "reuse_prefill" | "speculative_greedy" | "tokenizer_parity" | "detokenize_roundtrip" | "chat_template_server" | "chat_template_llama_server" | "perplexity";

/** Every name a cell's or a verdict's `check` column can hold (kernel suites: one per op of kernels/ops/registry.ts). */
export type CheckName = ModuleCheckName | BatteryCheckName | InlineCheckName | KernelCheckName;
