import { computeBudget, type BudgetRequest } from "./arithmetic.js";
import type { LlamaCppMeasurement } from "./measure-llamacpp.js";
import type { ModelShape } from "./model-shape.js";
import type { DeviceDescription, ResidencyPolicy } from "./policy.js";

/** Our prediction, llama.cpp's buffers and node-llama-cpp's estimate for one model and context, in llama.cpp's buffer terms. */
export interface BudgetComparison {
  readonly model: string;
  readonly request: BudgetRequest;
  readonly predicted: { readonly model: number; readonly kv: number; readonly recurrent: number; readonly compute: number; readonly total: number };
  readonly measured: { readonly model: number; readonly kv: number; readonly recurrent: number; readonly compute: number; readonly total: number };
  readonly nodeLlamaCppTotal: number;
  /** predicted / measured − 1, of the totals. */
  readonly error: number;
  readonly nodeLlamaCppError: number;
}

/** Within this of llama.cpp's own total the prediction is counted right (issue #43's bar). */
export const COMPARISON_TOLERANCE = 0.1;

/**
 * Puts the llama.cpp-on-CPU budget beside what llama.cpp allocated: weights (packed and
 * embedding/head) against its model buffer, KV and recurrent state against its KV and RS buffers,
 * activations against its compute plus output buffers.
 */
export function compareWithLlamaCpp(model: string, shape: ModelShape, policy: ResidencyPolicy, device: DeviceDescription, request: BudgetRequest, measurement: LlamaCppMeasurement): BudgetComparison {
  const budget = computeBudget(shape, policy, device, request).perDevice;
  const predicted = {
    model: budget.weights_packed + budget.twins + budget.embedding_head,
    kv: budget.kv_cache,
    recurrent: budget.recurrent_state,
    compute: budget.activations + budget.decode_transient + budget.trace_region,
  };
  const buffers = measurement.buffers;
  const measured = { model: buffers.model, kv: buffers.kv, recurrent: buffers.recurrent, compute: buffers.compute + buffers.output };
  const sum = (parts: { model: number; kv: number; recurrent: number; compute: number }): number => parts.model + parts.kv + parts.recurrent + parts.compute;
  const predictedTotal = sum(predicted);
  const measuredTotal = sum(measured);
  const nodeLlamaCppTotal = measurement.nodeLlamaCppEstimate.model + measurement.nodeLlamaCppEstimate.context;
  return {
    model, request,
    predicted: { ...predicted, total: predictedTotal },
    measured: { ...measured, total: measuredTotal },
    nodeLlamaCppTotal,
    error: predictedTotal / measuredTotal - 1,
    nodeLlamaCppError: nodeLlamaCppTotal / measuredTotal - 1,
  };
}

const mib = (bytes: number): string => (bytes / 1024 ** 2).toFixed(2);
const percent = (fraction: number): string => `${fraction >= 0 ? "+" : ""}${(fraction * 100).toFixed(1)}%`;

/** The docs table: one row per model and context, MiB, ours and node-llama-cpp's error against llama.cpp's total. */
export function comparisonTable(rows: readonly BudgetComparison[]): string[] {
  const lines = [
    "| model | ctx x slots | model buf (ours / llama.cpp) | KV | RS | compute+output | total ours | total llama.cpp | ours | node-llama-cpp est. | node-llama-cpp |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const row of rows) {
    const p = row.predicted, m = row.measured;
    lines.push(`| ${row.model} | ${row.request.contextPerSlot} x ${row.request.slots} | ${mib(p.model)} / ${mib(m.model)} | ${mib(p.kv)} / ${mib(m.kv)} | ${mib(p.recurrent)} / ${mib(m.recurrent)} | ${mib(p.compute)} / ${mib(m.compute)} | ${mib(p.total)} | ${mib(m.total)} | ${percent(row.error)} | ${mib(row.nodeLlamaCppTotal)} | ${percent(row.nodeLlamaCppError)} |`);
  }
  return lines;
}
