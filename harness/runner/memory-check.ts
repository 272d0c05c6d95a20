import { basename, dirname, resolve } from "node:path";
import { computeBudget, type DeviceBudget } from "../budget/arithmetic.js";
import { COMPARISON_TOLERANCE } from "../budget/compare.js";
import { bytesText } from "../budget/format.js";
import { memoryGate, type GroupRow } from "../budget/memory-gate.js";
import { modelShape } from "../budget/model-shape.js";
import { budgetFile, loadDevice, loadPolicy, type ResidencyPolicy } from "../budget/policy.js";
import { readGgufHeader } from "../gguf/read.js";
import type { MemoryRecord } from "../results/read-run.js";
import type { CellRecord, RunListener } from "../results/types.js";
import type { Suite } from "../suites/load.js";
import type { GateLevel, MemoryDeclaration } from "../suites/parity-suite.js";
import type { AllocationReport, SystemUnderTest } from "../sut/types.js";
import { makeCell, runCheck, type ArmScope, type CheckOutcome } from "./check.js";

/** A memory declaration with its defaults: llama.cpp on CPU (the embedded arm's and our server's policy) on the CPU host, within the 10% the budget was measured within. */
export interface MemoryCheckPlan {
  readonly gate: GateLevel;
  readonly policy: string;
  readonly device: string;
  readonly tolerance: number;
}

export function memoryCheckPlan(declared: MemoryDeclaration | undefined): MemoryCheckPlan | undefined {
  if (declared === undefined) return undefined;
  const { why: _why, ...fields } = typeof declared === "string" ? { gate: declared } : declared;
  return { policy: "llamacpp-cpu", device: "cpu-host", tolerance: COMPARISON_TOLERANCE, ...fields };
}

/** A policy or device the suite names: shipped by name, or a JSON file relative to the suite file. */
function budgetInput(kind: "policies" | "devices", reference: string, suite: Suite): string {
  const path = budgetFile(kind, reference);
  return path === reference ? resolve(dirname(suite.path), reference) : path;
}

/** What the check scored: its outcome, a cell per device and group, and the records summary.json keeps. */
export interface MemoryScore {
  readonly outcome: CheckOutcome;
  readonly cells: readonly Pick<CellRecord, "status" | "detail">[];
  readonly records: readonly MemoryRecord[];
}

const groupLine = (row: GroupRow, tolerance: number): string => {
  const held = (bytes: number | undefined) => (bytes === undefined ? "not reported" : bytesText(bytes));
  return `${row.device} ${row.group}: peak ${held(row.peak)}, steady ${held(row.steady)}; predicted peak ${bytesText(row.predictedPeak)}, steady ${bytesText(row.predictedSteady)} (+${(tolerance * 100).toFixed(0)}% allowed)`;
};

/**
 * Holds a report to its budget (pure): measured ≤ predicted × (1 + tolerance) per device and group,
 * steady and peak, and each device's peak within its usable DRAM. A report with no device is not
 * measured: SKIPPED, never a pass.
 */
export function scoreAllocations(where: { readonly suite: string; readonly arm: string; readonly label: string; readonly model: string }, plan: MemoryCheckPlan, policy: ResidencyPolicy, budget: DeviceBudget, report: AllocationReport): MemoryScore {
  const gate = memoryGate(budget.perDevice, report.devices, plan.tolerance, budget.usablePerDevice);
  if (gate.status === "not_measured") {
    const reason = `not measured: ${where.label} reported allocations on no device`;
    return { outcome: { status: "skip", reason }, cells: [{ status: "skip", detail: reason }], records: [] };
  }
  const { shape } = report;
  const records = gate.rows.map((row): MemoryRecord => ({
    suite: where.suite, arm: where.arm, model: where.model, policy: policy.name, device: row.device, group: row.group,
    steady_bytes: row.steady ?? null, peak_bytes: row.peak ?? null, predicted_steady_bytes: row.predictedSteady, predicted_peak_bytes: row.predictedPeak,
  }));
  const peak = gate.rows.reduce((sum, row) => sum + (row.peak ?? 0), 0);
  const predicted = gate.rows.reduce((sum, row) => sum + row.predictedPeak, 0);
  return {
    outcome: {
      status: gate.status,
      summary: `${where.label} memory under ${policy.name} (${shape.slots} slot(s) x ${shape.contextPerSlot} tokens, ubatch ${shape.batchTokens}): peak ${bytesText(peak)} of ${bytesText(predicted)} predicted; ${gate.summary.replace(/^memory: /, "")}`,
      metrics: { peak_bytes: peak, predicted_peak_bytes: predicted, groups_over: gate.over.length, devices_over: gate.overDevice.length, tolerance: plan.tolerance },
    },
    cells: gate.rows.map((row) => ({ status: row.over ? "fail" : row.peak === undefined && row.steady === undefined ? "skip" : "pass", detail: groupLine(row, plan.tolerance) })),
    records,
  };
}

/**
 * The arm's memory check, asked once its checks are done (peak is what it held while serving them):
 * the SUT's allocations held to the budget its model's GGUF header predicts, under the policy and
 * device the arm declares, for the shape the SUT says it allocated for. An arm that declares none has
 * no check; a SUT that cannot be asked (a runner without `allocations`, a server without GET
 * /allocations) is SKIPPED as not measured, never passed.
 */
export async function askAllocations(suite: Suite, arm: { readonly label: string; readonly gate: GateLevel; readonly memory?: MemoryDeclaration }, sut: SystemUnderTest, reproduce: string, emit: RunListener): Promise<MemoryRecord[]> {
  const plan = memoryCheckPlan(arm.memory);
  if (plan === undefined) return [];
  const scope: ArmScope = { suiteName: suite.name, arm, sut, emit, signal: new AbortController().signal, reproduce };
  let records: readonly MemoryRecord[] = [];
  await runCheck(scope, "memory", plan.gate, [], async (gate) => {
    const score = await measure(suite, arm, sut, plan);
    await emit({ kind: "cells", cells: score.cells.map((cell) => makeCell(scope, "memory", gate, cell)) });
    records = score.records;
    return score.outcome;
  });
  return [...records];
}

async function measure(suite: Suite, arm: { readonly label: string }, sut: SystemUnderTest, plan: MemoryCheckPlan): Promise<MemoryScore> {
  const notMeasured = (why: string): MemoryScore => {
    const reason = `not measured: ${why}`;
    return { outcome: { status: "skip", reason }, cells: [{ status: "skip", detail: reason }], records: [] };
  };
  if (sut.allocations === undefined) return notMeasured(`${sut.label} cannot be asked for its allocations (a runner lists \`allocations\` among its capabilities: docs/runner-protocol.md)`);
  const modelPath = sut.provenance.modelPath;
  if (modelPath === undefined) return notMeasured(`the arm names no model file to read a budget from`);
  const report = await sut.allocations();
  if ("notMeasured" in report) return notMeasured(`${sut.label}: ${report.notMeasured}`);
  const policy = loadPolicy(budgetInput("policies", plan.policy, suite));
  const device = loadDevice(budgetInput("devices", plan.device, suite));
  const { kvBytesPerElement, ...request } = report.shape;
  // The KV type is a setting of the engine, not of where its bytes live: the SUT's own says what its KV holds.
  const described = kvBytesPerElement === undefined ? policy : { ...policy, kv_bytes_per_element: kvBytesPerElement };
  const budget = computeBudget(modelShape(readGgufHeader(modelPath), modelPath), described, device, request);
  return scoreAllocations({ suite: suite.name, arm: arm.label, label: sut.label, model: basename(modelPath) }, plan, policy, budget, report);
}
