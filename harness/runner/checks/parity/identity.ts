import { basename } from "node:path";
import { identityOutcome } from "../../identity.js";
import type { ParityCheck } from "./parity-arm-state.js";

/**
 * The SUT must run the artifact its goldens were made from. An informational arm that names
 * another artifact on purpose (a quantization held to F32 goldens) must run the one it names.
 * Always asked, and first: every other verdict of the arm is about the artifact this one names.
 */
export const identityCheck: ParityCheck<"identity"> = {
  kind: "parity",
  name: "identity",
  needs: [],
  level: () => "required",
  run({ context }, gate) {
    const { sut, arm, goldens } = context;
    const goldensModel = goldens.manifest.model;
    const armModel = sut.provenance.modelSha256 === undefined ? undefined : { file: basename(sut.provenance.modelPath ?? "(unnamed)"), sha256: sut.provenance.modelSha256 };
    const ownArtifact = arm.gate === "informational" && armModel !== undefined && armModel.sha256 !== goldensModel.sha256;
    const expected = ownArtifact ? { ...armModel, what: "the model the arm names" } : { file: goldensModel.file, sha256: goldensModel.sha256, what: `the goldens' model (${goldensModel.id})` };
    return identityOutcome(context, gate, expected, ownArtifact ? `the model the arm names, held to the goldens of ${goldensModel.id}` : "the goldens' artifact");
  },
};
