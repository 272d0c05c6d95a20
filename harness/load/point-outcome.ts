import { paritySummaryLine, tallyParity } from "../parity/classify.js";
import type { GateVerdict } from "../results/types.js";
import { summarizeLoadPoint, type LoadPointSummary, type Slo } from "./aggregate.js";
import type { PointMeasurement } from "./measure-point.js";
import { loadPointVerdict } from "./point-verdict.js";
import { requestMetrics, type RequestMetrics } from "./request-metrics.js";

/** One point, aggregated: its perf-table summary, each request's metrics, and its verdicts. */
export interface PointOutcome {
  readonly summary: LoadPointSummary;
  /** Per request, in samples order (undefined: the request failed). */
  readonly metrics: readonly (RequestMetrics | undefined)[];
  /** The point's `load` verdict (required: it passes only on numbers it measured). */
  readonly verdict: GateVerdict;
  /** `parity_under_load`, when parity prompts were sent: required, FORWARD-DIVERGENT must be 0. */
  readonly parityVerdict: GateVerdict | undefined;
  readonly parityLine: string | undefined;
}

/** Pure: a point's measurement → its aggregate and verdicts. */
export function pointOutcome(measurement: PointMeasurement, slo: Slo): PointOutcome {
  const { label, result } = measurement;
  const metrics = result.samples.map(requestMetrics);
  const summary = summarizeLoadPoint(label, result.samples, metrics, result.durationS, slo);
  const verdict = loadPointVerdict(label, result.stoppedBy, summary);
  if (measurement.parity === undefined) return { summary, metrics, verdict, parityVerdict: undefined, parityLine: undefined };
  const tally = tallyParity(measurement.parity);
  const parityLine = paritySummaryLine(`${label} parity under load`, tally);
  const parityVerdict: GateVerdict = {
    suite: "load", arm: label, check: "parity_under_load", gate: "required", status: tally.forwardDivergent === 0 ? "pass" : "fail", summary: parityLine,
    metrics: { strict: tally.strict, near_tie: tally.nearTie, forward_divergent: tally.forwardDivergent, max_gap_mnats: tally.maxGapMnats },
  };
  return { summary, metrics, verdict, parityVerdict, parityLine };
}
