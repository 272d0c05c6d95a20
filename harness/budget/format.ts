import { BUDGET_CATEGORIES, type BudgetCategory, type BudgetRequest, type DeviceBudget } from "./arithmetic.js";
import type { DeviceDescription, ResidencyPolicy } from "./policy.js";

const GIB = 1024 ** 3;
const MIB = 1024 ** 2;

/** Bytes as GiB above 1 GiB, MiB below, with the exact count when it is small enough to read. */
export function bytesText(bytes: number): string {
  return bytes >= GIB ? `${(bytes / GIB).toFixed(2)} GiB` : `${(bytes / MIB).toFixed(2)} MiB`;
}

const LABELS: Readonly<Record<BudgetCategory, string>> = {
  weights_packed: "weights packed",
  twins: "bf16 twins",
  embedding_head: "embedding/head",
  kv_cache: "KV cache",
  recurrent_state: "recurrent state",
  activations: "activations",
  decode_transient: "decode transient",
  trace_region: "trace region",
};

/** The printed budget: one line per category, the total against usable DRAM, the verdict, then the facts behind the figures. */
export function formatBudget(model: string, policy: ResidencyPolicy, device: DeviceDescription, request: BudgetRequest, budget: DeviceBudget): string[] {
  const { facts } = budget;
  const lines = [
    `budget: ${model} under ${policy.name} on ${device.name} (${facts.devices} device${facts.devices === 1 ? "" : "s"}, mesh ${device.mesh.join("x")})`,
    `  ${request.slots} slot(s) x ${request.contextPerSlot} tokens, ubatch ${facts.ubatchTokens}, ${facts.kvCells} KV cells`,
    "  per device:",
  ];
  for (const category of BUDGET_CATEGORIES) lines.push(`    ${LABELS[category].padEnd(18)} ${bytesText(budget.perDevice[category]).padStart(12)}`);
  const verdict = budget.fits ? "FITS" : `DOES NOT FIT (${budget.overLimits.join("; ")})`;
  lines.push(`    ${"total".padEnd(18)} ${bytesText(budget.totalPerDevice).padStart(12)}  of ${bytesText(budget.usablePerDevice)} usable (${bytesText(device.dram_bytes_per_device)} less ${(device.headroom_fraction * 100).toFixed(0)}% headroom): ${verdict}`);
  const eh = facts.embeddingHeadBytes;
  lines.push(
    "  facts:",
    `    packed weights (whole model) ${bytesText(facts.packedBytes)}; bf16 twins (whole model) ${bytesText(facts.twinBytes)}`,
    `    embedding packed ${bytesText(eh.embeddingPacked)} + twin ${bytesText(eh.embeddingTwin)}; head packed ${bytesText(eh.headPacked)} + twin ${bytesText(eh.headTwin)}`,
    `    weight chains decoded per call ${facts.weightChains} -> trace demand ${bytesText(facts.traceDemandBytes)}${device.trace_region.policy === "fixed" ? ` (fixed region ${bytesText(device.trace_region.bytes)}: ${facts.traceDemandBytes > device.trace_region.bytes ? "demand exceeds it" : "demand fits"})` : ""}`,
  );
  if (facts.largestDecode !== undefined) {
    lines.push(`    largest per-call decode ${facts.largestDecode.name}: ${facts.largestDecode.chunkRows} rows per chunk, ${bytesText(facts.largestDecode.bytes)} (${facts.largestDecode.bytes} B) live`);
  }
  return lines;
}
