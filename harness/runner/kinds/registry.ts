import type { Suite } from "../../suites/load.js";
import { chatTemplateKind } from "./chat-template.js";
import { conformanceKind } from "./conformance.js";
import type { LegArm, SuiteKind } from "./kind.js";
import { kernelsKind } from "./kernels.js";
import { niahKind } from "./niah.js";
import { parityKind } from "./parity.js";
import { perplexityKind } from "./perplexity.js";
import { reuseKind } from "./reuse.js";
import { samplingKind } from "./sampling.js";
import { speculativeKind } from "./speculative.js";
import { tokenizerKind } from "./tokenizer.js";

type KindOf<K extends Suite["kind"]> = Extract<Suite, { kind: K }>;

/** Every suite kind the battery runs, by the `kind` its suite files name (and whose schema is suites/schema/<kind>.schema.json). */
const SUITE_KINDS: { readonly [K in Suite["kind"]]: SuiteKind<KindOf<K>, KindOf<K>["arms"][number] & LegArm> } = {
  parity: parityKind,
  niah: niahKind,
  kernels: kernelsKind,
  conformance: conformanceKind,
  reuse: reuseKind,
  speculative: speculativeKind,
  tokenizer: tokenizerKind,
  "chat-template": chatTemplateKind,
  perplexity: perplexityKind,
  sampling: samplingKind,
};

/** The plug-in that runs suites of this suite's kind. */
export function suiteKind(suite: Suite): SuiteKind<Suite, LegArm> {
  // The registry's mapped type pairs each kind with its own suite type; indexing by a union loses that pairing, which `suite.kind` restores at run time.
  return SUITE_KINDS[suite.kind] as unknown as SuiteKind<Suite, LegArm>;
}

export const SUITE_KIND_NAMES = Object.keys(SUITE_KINDS) as readonly Suite["kind"][];
