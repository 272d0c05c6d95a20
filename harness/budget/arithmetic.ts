import { GGML_BLOCK } from "../gguf/types.js";
import type { ClassifiedTensor, ModelShape } from "./model-shape.js";
import type { ClassResidency, DeviceDescription, ResidencyPolicy } from "./policy.js";

/** What the budget is asked for: slots (parallel sequences), each holding this many tokens, fed in ubatches of this many. */
export interface BudgetRequest {
  readonly contextPerSlot: number;
  readonly slots: number;
  readonly batchTokens: number;
}

/** The categories a device's memory is budgeted by (and, later, measured by). */
export const BUDGET_CATEGORIES = [
  "weights_packed", "twins", "embedding_head", "kv_cache", "recurrent_state", "activations", "decode_transient", "trace_region",
] as const;
export type BudgetCategory = typeof BUDGET_CATEGORIES[number];

export interface DeviceBudget {
  /** Bytes per device by category. */
  readonly perDevice: Readonly<Record<BudgetCategory, number>>;
  readonly totalPerDevice: number;
  /** DRAM per device less the headroom: what the total must not exceed. */
  readonly usablePerDevice: number;
  /** Why it does not fit, one reason per failed limit; empty when it fits. */
  readonly overLimits: readonly string[];
  readonly fits: boolean;
  /** The arithmetic's intermediate facts, for the report and the doc. */
  readonly facts: BudgetFacts;
}

export interface BudgetFacts {
  readonly devices: number;
  readonly packedBytes: number;
  readonly twinBytes: number;
  readonly embeddingHeadBytes: { readonly embeddingPacked: number; readonly embeddingTwin: number; readonly headPacked: number; readonly headTwin: number };
  /** Weights decoded per call (packed, no twin): each is one chain in a captured graph. */
  readonly weightChains: number;
  readonly traceDemandBytes: number;
  /** The weight whose per-call decode peaks highest, and its chunk rows. */
  readonly largestDecode: { readonly name: string; readonly chunkRows: number; readonly bytes: number } | undefined;
  readonly kvCells: number;
  readonly ubatchTokens: number;
}

const GGML_PAD = 256;
const padUp = (value: number, to: number): number => Math.ceil(value / to) * to;
const F32 = 4;

function share(bytes: number, placement: ClassResidency["placement"], devices: number): number {
  return placement === "sharded" ? bytes / devices : bytes;
}

/** Per-call decode of one packed weight: rows per chunk (the f32 plane capped), and the transient it holds live. */
export function chunkedDecode(tensor: Pick<ClassifiedTensor, "rowLength" | "rows">, decode: NonNullable<ResidencyPolicy["decode"]>): { chunkRows: number; bytes: number } {
  const chunkRows = Math.max(1, Math.min(tensor.rows, Math.floor(decode.chunk_plane_bytes / (F32 * tensor.rowLength))));
  return { chunkRows, bytes: chunkRows * tensor.rowLength * decode.transient_bytes_per_element };
}

/**
 * llama.cpp's graph reservation (its "compute buffer") for a worst-case ubatch, without flash
 * attention: the larger of the attention step (per head, a KQ row per cached cell, plus the mask,
 * over the residual stream, Q and K before and after RoPE, and V) and the logits step. An
 * approximation of ggml-alloc's peak, checked against llama.cpp's logs in docs/memory-budget.md.
 */
export function graphActivations(shape: ModelShape, ubatch: number, cellsPerSlot: (layer: ModelShape["attentionLayers"][number]) => number): number {
  const kvFloats = Math.max(0, ...shape.attentionLayers.map((layer) => layer.keyValueFloats));
  const scores = Math.max(0, ...shape.attentionLayers.map((layer) => (layer.heads + 1) * cellsPerSlot(layer)));
  const attention = ubatch * F32 * (scores + 3 * shape.embeddingLength + 2 * shape.queryFloats + kvFloats);
  const logits = ubatch * F32 * (shape.vocabulary + 3 * shape.embeddingLength);
  return Math.max(attention, logits);
}

function weightBytes(shape: ModelShape, policy: ResidencyPolicy, devices: number) {
  let packed = 0, twin = 0, packedBytes = 0, twinBytes = 0, chains = 0;
  const embeddingHead = { embeddingPacked: 0, embeddingTwin: 0, headPacked: 0, headTwin: 0 };
  let largestDecode: BudgetFacts["largestDecode"];
  for (const tensor of shape.tensors) {
    const residency = policy.classes[tensor.class];
    // Twins and per-call decode are for block-quantized weights; an F32 or F16 tensor is used as it is.
    const quantized = GGML_BLOCK[tensor.type].elements > 1;
    const packedHere = residency.packed ? tensor.bytes : 0;
    const twinHere = residency.twin && quantized ? tensor.elements * policy.twin_bytes_per_element : 0;
    packedBytes += packedHere;
    twinBytes += twinHere;
    if (tensor.class === "embedding" || tensor.class === "output_head") {
      const which = tensor.class === "embedding" ? "embedding" : "head";
      embeddingHead[`${which}Packed`] += share(packedHere, residency.placement, devices);
      embeddingHead[`${which}Twin`] += share(twinHere, residency.placement, devices);
    } else {
      packed += share(packedHere, residency.placement, devices);
      twin += share(twinHere, residency.placement, devices);
    }
    if (quantized && residency.packed && !residency.twin && policy.decode !== undefined && tensor.class !== "small" && tensor.class !== "embedding") {
      chains += 1;
      const decode = chunkedDecode(tensor, policy.decode);
      if (largestDecode === undefined || decode.bytes > largestDecode.bytes) largestDecode = { name: tensor.name, ...decode };
    }
  }
  // A tied head is the embedding table read as a matmul: the policy's head residency applies to it too.
  if (shape.tiedHead) {
    const table = shape.tensors.find((tensor) => tensor.class === "embedding");
    const head = policy.classes.output_head;
    if (table !== undefined && head.twin && !policy.classes.embedding.twin) embeddingHead.headTwin += share(table.elements * policy.twin_bytes_per_element, head.placement, devices);
  }
  return { packed, twin, packedBytes, twinBytes, chains, embeddingHead, largestDecode };
}

/** Computes the per-device budget: pure arithmetic on header shapes, a policy and a device. */
export function computeBudget(shape: ModelShape, policy: ResidencyPolicy, device: DeviceDescription, request: BudgetRequest): DeviceBudget {
  const devices = device.mesh[0] * device.mesh[1];
  const weights = weightBytes(shape, policy, devices);
  const kvCells = padUp(request.contextPerSlot, GGML_PAD) * request.slots;
  const ubatchTokens = Math.min(request.batchTokens, kvCells);
  // A sliding layer keeps, per slot (each slot is its own stream), its window plus one ubatch (llama-kv-cache-iswa.cpp).
  const slotCells = padUp(request.contextPerSlot, GGML_PAD);
  const layerCells = (layer: ModelShape["attentionLayers"][number]): number =>
    layer.slidingWindow === undefined ? kvCells : request.slots * Math.min(slotCells, padUp(layer.slidingWindow + ubatchTokens, GGML_PAD));
  const kvBytes = shape.attentionLayers.reduce((sum, layer) => sum + layerCells(layer) * layer.keyValueFloats * policy.kv_bytes_per_element, 0);
  const recurrentBytes = shape.recurrentLayers.reduce((sum, layer) => sum + layer.stateFloats, 0) * request.slots * policy.recurrent_bytes_per_element;
  const perSlotCells = (layer: ModelShape["attentionLayers"][number]): number => layerCells(layer) / request.slots;
  const outputBuffer = request.slots * shape.vocabulary * F32;
  const traceDemand = weights.chains * policy.trace_bytes_per_weight_chain;
  const trace = device.trace_region.policy === "fixed" ? device.trace_region.bytes : device.trace_region.policy === "dynamic" ? traceDemand : 0;
  const perDevice: Record<BudgetCategory, number> = {
    weights_packed: weights.packed,
    twins: weights.twin,
    embedding_head: weights.embeddingHead.embeddingPacked + weights.embeddingHead.embeddingTwin + weights.embeddingHead.headPacked + weights.embeddingHead.headTwin,
    kv_cache: share(kvBytes, policy.kv_placement, devices),
    recurrent_state: share(recurrentBytes, policy.kv_placement, devices),
    activations: graphActivations(shape, ubatchTokens, perSlotCells) + outputBuffer,
    decode_transient: weights.largestDecode?.bytes ?? 0,
    trace_region: trace,
  };
  const totalPerDevice = Object.values(perDevice).reduce((a, b) => a + b, 0);
  const usablePerDevice = device.dram_bytes_per_device * (1 - device.headroom_fraction);
  const overLimits = [
    ...(totalPerDevice > usablePerDevice ? ["total exceeds usable DRAM"] : []),
    // A capture that outgrows a fixed region dies at capture time however much DRAM is free.
    ...(device.trace_region.policy === "fixed" && traceDemand > device.trace_region.bytes ? ["trace demand exceeds the fixed trace region"] : []),
  ];
  return {
    perDevice, totalPerDevice, usablePerDevice, overLimits, fits: overLimits.length === 0,
    facts: {
      devices, packedBytes: weights.packedBytes, twinBytes: weights.twinBytes, embeddingHeadBytes: weights.embeddingHead,
      weightChains: weights.chains, traceDemandBytes: traceDemand, largestDecode: weights.largestDecode, kvCells, ubatchTokens,
    },
  };
}
