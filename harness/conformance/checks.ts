import { API_SURFACE_CHECKS } from "./groups/api-surface.js";
import { CAPACITY_CHECKS } from "./groups/capacity.js";
import { GREEDY_LOGPROB_CHECKS } from "./groups/greedy-logprobs.js";
import { METRICS_CHECKS } from "./groups/metrics.js";
import { OPENAI_SEMANTICS_CHECKS } from "./groups/openai-semantics.js";
import { SAMPLING_CHECKS } from "./groups/sampling.js";
import { TEXT_CHECKS } from "./groups/text.js";
import type { ConformanceCheck, ConformanceGroup } from "./target.js";

/** Every group of conformance checks (one file under ./groups/ each); adding a group is its file and one line here. */
const GROUPS: readonly ConformanceGroup[] = [
  API_SURFACE_CHECKS,
  CAPACITY_CHECKS,
  SAMPLING_CHECKS,
  METRICS_CHECKS,
  OPENAI_SEMANTICS_CHECKS,
  GREEDY_LOGPROB_CHECKS,
  TEXT_CHECKS,
];

/** The conformance checks any OpenAI-compatible server can be held to, by name (suites list them); a name two groups share is an error at load, never a silent override. */
export const CONFORMANCE_CHECKS: Readonly<Record<string, ConformanceCheck>> = Object.fromEntries(GROUPS.flatMap((group) => Object.entries(group)).map(([name, check], i, all) => {
  if (all.findIndex(([other]) => other === name) !== i) throw new Error(`two conformance groups name the check ${name}`);
  return [name, check];
}));
