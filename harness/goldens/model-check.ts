import { statSync } from "node:fs";
import { join } from "node:path";
import { BenchError } from "../errors.js";
import { readGguf } from "../gguf/read.js";
import { tokenizerFingerprint } from "../gguf/tokenizer-fingerprint.js";
import type { ModelRef } from "../fixtures/registry.js";
import { sha256File } from "../io/sha256.js";
import type { GoldensManifest } from "./manifest.js";

/** What the model check reads of any goldens directory (a parity suite's, a corpus's): where it is and the model it names. */
interface GoldensOfModel {
  readonly directory: string;
  readonly manifest: Pick<GoldensManifest, "model" | "tokenizer">;
}

/**
 * Refuses to compare against goldens made from a different model artifact: sha256, size and
 * tokenizer must all match. A mismatch is an error (exit 2), never a silent comparison.
 */
export async function assertGoldensMatchModel(goldens: GoldensOfModel, model: ModelRef, manifestFile = "manifest.json"): Promise<void> {
  const manifestPath = join(goldens.directory, manifestFile);
  const bytes = statSync(model.path).size;
  const sha256 = await sha256File(model.path);
  if (sha256 !== goldens.manifest.model.sha256 || bytes !== goldens.manifest.model.bytes) {
    throw new BenchError(
      `goldens were made from a different model artifact (manifest sha256 ${goldens.manifest.model.sha256.slice(0, 12)}…, ${goldens.manifest.model.bytes} B; ` +
        `${model.path} is ${sha256.slice(0, 12)}…, ${bytes} B)`,
      { file: manifestPath, field: "model.sha256", fix: "use the model the goldens were made from, or re-make them with `bench goldens make`" },
    );
  }
  const fingerprint = tokenizerFingerprint(readGguf(model.path));
  if (fingerprint !== goldens.manifest.tokenizer.fingerprint) {
    throw new BenchError("the model's tokenizer differs from the one the goldens were made with", {
      file: manifestPath, field: "tokenizer.fingerprint", fix: "re-make the goldens for this model",
    });
  }
}
