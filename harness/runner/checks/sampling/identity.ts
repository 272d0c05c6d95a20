import { identityOutcome } from "../../identity.js";
import type { SamplingCheck } from "./sampling-arm-state.js";

/** The server must run the model whose distributions its draws are held to. Always asked, and first. */
export const samplingIdentityCheck: SamplingCheck<"identity"> = {
  kind: "sampling",
  name: "identity",
  needs: [],
  level: () => "required",
  run: ({ context }, gate) => identityOutcome(context, gate, context.expectedModel, "the model the oracle's distributions come from"),
};
