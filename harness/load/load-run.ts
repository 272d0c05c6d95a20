import type { ExitCode } from "../results/exit-code.js";
import type { RunDirectory } from "../results/run-directory.js";
import { exitCodeFor } from "../results/verdicts.js";
import { clientBusyWarning, LOAD_TABLE_HEADER, loadEnding, pointLines, tableRow, verdictLine } from "./load-report.js";
import { firstServedModel, openLoadServer } from "./load-server.js";
import { measurePoint, type PointMeasurement } from "./measure-point.js";
import { openParityProbe, type ParityProbe } from "./parity-under-load.js";
import type { LoadPlan } from "./plan.js";
import { pointOutcome, type PointOutcome } from "./point-outcome.js";
import { loadRequests } from "./request-bodies.js";
import { encodeSamplesArrow, type SampleRow } from "./samples-arrow.js";

/** Where a load run's lines go (the CLI's: progress redrawn on a terminal, warnings and results). */
export interface LoadOutput {
  progress(message: string): void;
  warn(message: string, hint?: string): void;
  say(line: string): void;
}

/** How a load run ended: its exit code (from the verdicts it wrote), its perf table and its last line. */
export interface LoadRunOutcome {
  readonly code: ExitCode;
  readonly table: readonly string[];
  readonly ending: string;
}

/**
 * `bench load` after its options are planned: open the server, then each point in order —
 * measure (measure-point.ts) → aggregate (point-outcome.ts) → record and report (load-report.ts).
 * A point stopped by its error rate ends the run. The caller flushes the run directory.
 */
export async function runLoad(plan: LoadPlan, recorder: RunDirectory, out: LoadOutput): Promise<LoadRunOutcome> {
  const server = await openLoadServer(plan, out.progress);
  let parity: ParityProbe | undefined;
  try {
    if (server.provenance !== undefined) recorder.provenance.suts.push(server.provenance);
    const served = await firstServedModel(server.baseUrl, plan.apiKey, out.warn);
    const requests = await loadRequests(plan, server.baseUrl, served);
    const target = { ...requests, apiKey: plan.apiKey, stallTimeoutMs: plan.stallTimeoutMs };
    if (plan.paritySuite !== undefined && "model" in plan.server) parity = await openParityProbe(plan.paritySuite, plan.server.model, out.warn);
    const rows: SampleRow[] = [];
    const table = [...LOAD_TABLE_HEADER];
    let failedHard = false;
    for (const pointIndex of plan.modes.keys()) {
      const measurement = await measurePoint(plan, pointIndex, target, server.baseUrl, parity, out.progress);
      const outcome = pointOutcome(measurement, plan.slo);
      rows.push(...measurement.result.samples.map((sample, i) => ({ point: measurement.label, sample, metrics: outcome.metrics[i] })));
      const row = tableRow(server.label, server.slots, outcome.summary);
      table.push(row);
      await recordPoint(recorder, measurement, outcome, rows, out);
      for (const line of pointLines(row, measurement, outcome)) out.say(line);
      if (outcome.parityVerdict?.status === "fail") failedHard = true;
      if (measurement.result.stoppedBy === "error-rate") {
        failedHard = true;
        break;
      }
    }
    // From the verdicts written: a point that measured nothing fails (or skips) the run like any gate.
    const code = exitCodeFor(recorder.allVerdicts());
    return { code, table, ending: loadEnding(failedHard, code) };
  } finally {
    await parity?.close();
    await server.close();
  }
}

/** A point into the run directory: its provenance (summary, client load, the server's counters and gauges), samples, verdicts and arm end. */
async function recordPoint(recorder: RunDirectory, measurement: PointMeasurement, outcome: PointOutcome, rows: readonly SampleRow[], out: LoadOutput): Promise<void> {
  const { label, mode, result } = measurement;
  recorder.provenance.load.push({ label, mode, stopped_by: result.stoppedBy, summary: outcome.summary, client: result.client, server_metrics_delta: measurement.serverDeltas, server_gauges_during: measurement.gauges });
  const busy = clientBusyWarning(label, result.client);
  if (busy !== undefined) out.warn(busy.message, busy.hint);
  recorder.setSamples(encodeSamplesArrow(rows));
  const notPassed = verdictLine(label, outcome);
  if (notPassed !== undefined) out.say(notPassed);
  await recorder.record({ kind: "verdict", verdict: outcome.verdict });
  if (outcome.parityVerdict !== undefined) await recorder.record({ kind: "verdict", verdict: outcome.parityVerdict });
  await recorder.record({ kind: "arm-end", suite: "load", arm: label, summaryLine: outcome.parityLine });
}
