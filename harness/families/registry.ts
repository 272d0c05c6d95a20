import { exportGemma4 } from "../export-hf/families/gemma4.js";
import { exportLlama } from "../export-hf/families/llama.js";
import { exportNemotronH } from "../export-hf/families/nemotron-h.js";
import { exportQwen35 } from "../export-hf/families/qwen35.js";
import type { GgufModel } from "../export-hf/gguf-model.js";
import type { HfModel } from "../export-hf/hf-model.js";
import type { FixtureModel } from "../fixtures/architecture.js";
import { buildCopyModel } from "../fixtures/copy-model.js";
import { buildCopyGemma4 } from "../fixtures/copy-model-gemma4.js";
import { buildNemotronCopyModel } from "../fixtures/copy-model-nemotron.js";
import { buildCopyQwen35 } from "../fixtures/copy-model-qwen35.js";
import { buildCopyQwen35Moe } from "../fixtures/copy-model-qwen35moe.js";
import { buildGemma4 } from "../fixtures/families/gemma4.js";
import { buildGemma4Gemma3Vocab } from "../fixtures/families/gemma4-gemma3-vocab.js";
import { buildLlamaLlama3Vocab } from "../fixtures/families/llama-llama3-vocab.js";
import { buildNemotronHMoe } from "../fixtures/families/nemotron-h-moe.js";
import { buildQwen35Tiny } from "../fixtures/families/qwen35.js";
import { buildQwen35Qwen3Vocab } from "../fixtures/families/qwen35-qwen3-vocab.js";
import { buildQwen35MoeTiny } from "../fixtures/families/qwen35moe.js";
import { buildTinyRandom } from "../fixtures/tiny-random.js";
import { buildTinyRandomDraft } from "../fixtures/tiny-random-draft.js";
import { buildQwen35MoeTinyMtp, buildQwen35TinyMtp } from "../fixtures/families/qwen35-mtp.js";
import { QUANT_NAMES, type QuantName } from "../quant/registry.js";

/** One fixture model of a family: built by the harness, cached under its name. */
export interface FamilyFixture {
  readonly name: string;
  readonly build: () => FixtureModel;
  /** Encodings the fixture comes in (K-quants need rows that are whole 256-value blocks). */
  readonly quants: readonly QuantName[];
  /** The fault planted in it on purpose (the gates must catch it); none for a clean model. */
  readonly fault?: string;
}

/**
 * A model family: everything the harness holds for one llama.cpp architecture, found from this
 * entry. test/families.test.ts fails when a family lacks a part (a clean fixture of its
 * architecture, goldens and required arms in its suite, an exporter, a float64 reference, a
 * planted fault) or when a part belongs to no family.
 */
export interface ModelFamily {
  /** llama.cpp's `general.architecture`: the key the exporter and the float64 reference look a model up by. */
  readonly architecture: string;
  /** Its fixtures (harness/fixtures/): the clean models, and those with a planted fault. */
  readonly fixtures: readonly FamilyFixture[];
  /** The parity suite (suites/<name>.json) whose required arms hold its first clean fixture to llama.cpp's goldens. */
  readonly suite: string;
  /** Its GGUF in transformers' layout and config (harness/export-hf/families/): what the transformers oracle loads. */
  readonly exportHf: (model: GgufModel) => HfModel;
  /**
   * The float64 reference's module (harness/oracle/float64/reference/), as reference_forward.py's FAMILIES
   * maps the architecture; its `faults_for` names the runner FAULTs planted in that forward.
   */
  readonly reference: string;
}

const F32_ONLY: readonly QuantName[] = ["F32"];

export const MODEL_FAMILIES: readonly ModelFamily[] = [
  {
    architecture: "llama",
    fixtures: [
      { name: "tiny-random", build: () => buildTinyRandom("none"), quants: QUANT_NAMES },
      { name: "tiny-random-perturbed-layer", build: () => buildTinyRandom("perturbed-layer"), quants: QUANT_NAMES, fault: "perturbed-layer" },
      { name: "tiny-random-rope-base", build: () => buildTinyRandom("rope-base"), quants: QUANT_NAMES, fault: "rope-base" },
      { name: "tiny-random-swapped-vocab", build: () => buildTinyRandom("swapped-vocab"), quants: QUANT_NAMES, fault: "swapped-vocab" },
      // A draft model for speculative decoding: tiny-random's weights with deterministic noise, its vocabulary.
      { name: "tiny-random-draft", build: buildTinyRandomDraft, quants: F32_ONLY },
      { name: "copy-4k", build: () => buildCopyModel("none"), quants: F32_ONLY },
      // A llama stack speaking Llama 3's real 128,256-token vocabulary (byte-level BPE, llama-bpe, its chat template).
      { name: "llama-llama3-vocab", build: buildLlamaLlama3Vocab, quants: F32_ONLY },
      { name: "copy-4k-rope-base", build: () => buildCopyModel("rope-base"), quants: F32_ONLY, fault: "rope-base" },
    ],
    suite: "parity16",
    exportHf: exportLlama,
    reference: "llama.py",
  },
  {
    architecture: "qwen35",
    fixtures: [
      { name: "qwen35-tiny", build: () => buildQwen35Tiny("none"), quants: QUANT_NAMES },
      { name: "qwen35-tiny-gate-sign", build: () => buildQwen35Tiny("gate-sign"), quants: F32_ONLY, fault: "gate-sign" },
      { name: "qwen35-tiny-decay-twice", build: () => buildQwen35Tiny("decay-twice"), quants: F32_ONLY, fault: "decay-twice" },
      // A qwen35 stack speaking Qwen3's real 151,936-token vocabulary (byte-level BPE, its chat template).
      { name: "qwen35-qwen3-vocab", build: buildQwen35Qwen3Vocab, quants: F32_ONLY },
      // qwen35-tiny's trunk and one MTP (next-N) block after it, for speculative decoding.
      { name: "qwen35-tiny-mtp", build: () => buildQwen35TinyMtp("none"), quants: F32_ONLY },
      { name: "qwen35-tiny-mtp-in-trunk", build: () => buildQwen35TinyMtp("mtp-in-trunk"), quants: F32_ONLY, fault: "mtp-in-trunk" },
      // The needle-retrieving copy circuit in qwen35's own mixers (docs/copy-model-qwen35.md), and its planted faults.
      { name: "copy-4k-qwen35", build: () => buildCopyQwen35("none"), quants: F32_ONLY },
      { name: "copy-4k-qwen35-rope-dims", build: () => buildCopyQwen35("rope-dims"), quants: F32_ONLY, fault: "rope-dims" },
      { name: "copy-4k-qwen35-conv-reversed", build: () => buildCopyQwen35("conv-reversed"), quants: F32_ONLY, fault: "conv-reversed" },
    ],
    suite: "zoo",
    exportHf: exportQwen35,
    reference: "qwen35.py",
  },
  {
    architecture: "qwen35moe",
    fixtures: [
      { name: "qwen35moe-tiny", build: () => buildQwen35MoeTiny("none"), quants: QUANT_NAMES },
      { name: "qwen35moe-tiny-topk-minus-one", build: () => buildQwen35MoeTiny("topk-minus-one"), quants: F32_ONLY, fault: "topk-minus-one" },
      { name: "qwen35moe-tiny-topk-plus-one", build: () => buildQwen35MoeTiny("topk-plus-one"), quants: F32_ONLY, fault: "topk-plus-one" },
      { name: "qwen35moe-tiny-mtp", build: buildQwen35MoeTinyMtp, quants: F32_ONLY },
      // copy-4k-qwen35's circuit with its last FFN routing by the predicted class (docs/copy-model-qwen35.md).
      { name: "copy-4k-qwen35moe", build: () => buildCopyQwen35Moe("none"), quants: F32_ONLY },
      { name: "copy-4k-qwen35moe-expert-order", build: () => buildCopyQwen35Moe("expert-order"), quants: F32_ONLY, fault: "expert-order" },
    ],
    suite: "zoo",
    exportHf: exportQwen35,
    reference: "qwen35.py",
  },
  {
    architecture: "gemma4",
    fixtures: [
      { name: "gemma4-tiny", build: () => buildGemma4("none"), quants: QUANT_NAMES },
      // A gemma4 stack speaking Gemma 3's real 262,144-token vocabulary (SentencePiece, its chat template).
      { name: "gemma4-gemma3-vocab", build: buildGemma4Gemma3Vocab, quants: F32_ONLY },
      { name: "gemma4-tiny-window-plus-one", build: () => buildGemma4("window-plus-one"), quants: F32_ONLY, fault: "window-plus-one" },
      { name: "gemma4-tiny-window-minus-one", build: () => buildGemma4("window-minus-one"), quants: F32_ONLY, fault: "window-minus-one" },
      // The needle model in gemma4's architecture: sliding layers of window 2 shift tokens, the global layer retrieves.
      { name: "copy-4k-gemma4", build: () => buildCopyGemma4("none"), quants: F32_ONLY },
      { name: "copy-4k-gemma4-window-plus-one", build: () => buildCopyGemma4("window-plus-one"), quants: F32_ONLY, fault: "window-plus-one" },
      { name: "copy-4k-gemma4-window-full", build: () => buildCopyGemma4("window-full"), quants: F32_ONLY, fault: "window-full" },
      { name: "copy-4k-gemma4-global-as-sliding", build: () => buildCopyGemma4("global-as-sliding"), quants: F32_ONLY, fault: "global-as-sliding" },
    ],
    suite: "zoo",
    exportHf: exportGemma4,
    reference: "gemma4.py",
  },
  {
    architecture: "nemotron_h_moe",
    fixtures: [
      { name: "nemotron-h-moe-tiny", build: () => buildNemotronHMoe(), quants: QUANT_NAMES },
      // Retrieves by construction through its conv shifts, induction head and class routing (docs/copy-model-nemotron.md).
      { name: "copy-4k-nemotron", build: () => buildNemotronCopyModel("none"), quants: F32_ONLY },
      { name: "copy-4k-nemotron-conv-reversed", build: () => buildNemotronCopyModel("conv-reversed"), quants: F32_ONLY, fault: "conv-reversed" },
      { name: "copy-4k-nemotron-experts-permuted", build: () => buildNemotronCopyModel("experts-permuted"), quants: F32_ONLY, fault: "experts-permuted" },
    ],
    suite: "zoo",
    exportHf: exportNemotronH,
    reference: "nemotron_h.py",
  },
];

/** The family of a llama.cpp architecture, if the harness holds one. */
export function familyOf(architecture: string): ModelFamily | undefined {
  return MODEL_FAMILIES.find((family) => family.architecture === architecture);
}
