import type { GreedyRequest, SystemUnderTest } from "../../harness/sut/types.js";
import { SutGoneError } from "../../harness/sut/sut-gone.js";

/**
 * FAKE, for fault injection only: wraps a REAL SUT and misbehaves on demand in ways llama.cpp
 * cannot be made to on cue (hang, crash, error once, lose a capability, be fed other prompt ids).
 * Every number it returns otherwise comes from the real SUT underneath.
 */
export type Fault =
  | { readonly kind: "hang-on-greedy-call"; readonly call: number }
  | { readonly kind: "crash-on-greedy-call"; readonly call: number }
  | { readonly kind: "error-on-greedy-call"; readonly call: number }
  | { readonly kind: "without"; readonly capability: "batchedGreedy" | "teacherForcedTopK" | "tokenize" }
  | { readonly kind: "tamper-prompt-ids" };

export function faultInjectingSut(real: SystemUnderTest, fault: Fault): SystemUnderTest {
  let greedyCalls = 0;
  const greedy = async (requests: readonly GreedyRequest[]) => {
    greedyCalls++;
    if (fault.kind === "hang-on-greedy-call" && greedyCalls === fault.call) return new Promise<number[][]>(() => {});
    // A crashed process is gone (as the stdio adapter reports it); an error leaves the SUT serving.
    if (fault.kind === "crash-on-greedy-call" && greedyCalls === fault.call) throw new SutGoneError("SUT process exited with signal SIGSEGV");
    if (fault.kind === "error-on-greedy-call" && greedyCalls === fault.call) throw new Error("kernel launch failed");
    if (fault.kind === "tamper-prompt-ids") {
      return real.greedy!(requests.map((r) => ({ ...r, promptIds: [r.promptIds[0], 260, ...r.promptIds.slice(2)] })));
    }
    return real.greedy!(requests);
  };
  const sut: SystemUnderTest = {
    label: `${real.label} [fault: ${fault.kind}]`,
    provenance: real.provenance,
    tokenize: real.tokenize?.bind(real),
    detokenize: real.detokenize?.bind(real),
    inspectTokens: real.inspectTokens?.bind(real),
    greedy,
    batchedGreedy: real.batchedGreedy?.bind(real),
    teacherForcedTopK: real.teacherForcedTopK?.bind(real),
    close: () => real.close(),
  };
  if (fault.kind === "without") delete sut[fault.capability];
  return sut;
}
