import { identityOutcome } from "../../identity.js";
import type { NiahCheck } from "./niah-arm-state.js";

/** The SUT must run the model the arm names. Always asked, and first: the grid is about the artifact this one names. */
export const niahIdentityCheck: NiahCheck<"identity"> = {
  kind: "niah",
  name: "identity",
  needs: [],
  level: () => "required",
  run: ({ context }, gate) => identityOutcome(context, gate, context.expectedModel, "the model the arm names"),
};
