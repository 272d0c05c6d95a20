import type { CheckResult, ConformanceTarget } from "../target.js";
import type { TextReference } from "../text-reference.js";

/** The arm's text reference, or the SKIP that says why there is none (nothing exact to hold the text to is no pass). */
export function referenceOf(target: ConformanceTarget): TextReference | CheckResult {
  const reference = target.textReference ?? "the arm names no model file whose vocabulary could hold the text (a url arm)";
  return typeof reference === "string" ? { status: "skip", detail: reference } : reference;
}
