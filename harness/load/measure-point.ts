import { setTimeout as sleep } from "node:timers/promises";
import { parsePrometheusText } from "../conformance/prometheus.js";
import type { PromptParity } from "../parity/classify.js";
import { httpCall } from "../sut/http-call.js";
import type { ParityProbe } from "./parity-under-load.js";
import { modeLabel, runLoadPoint, type LoadMode, type LoadPointResult, type LoadTarget } from "./run-load.js";
import type { LoadPlan } from "./plan.js";

/** The server's gauges at one moment of a point (slots busy, queue depth, in flight), `t_ms` after it started. */
export type GaugeSample = Record<string, number>;

/** What one load point measured: the client's samples, the parity prompts' classes, and the server's own counters and gauges. */
export interface PointMeasurement {
  readonly label: string;
  readonly mode: LoadMode;
  readonly result: LoadPointResult;
  /** The parity prompts sent during the point, classified (undefined: no parity probe). */
  readonly parity: readonly PromptParity[] | undefined;
  /** How much each of the server's `_total` counters rose over the point; null where /metrics did not answer. */
  readonly serverDeltas: Record<string, number> | null;
  readonly gauges: readonly GaugeSample[];
}

/** How often the server's gauges are sampled while a point runs. */
const GAUGE_EVERY_MS = 250;

const scrape = async (baseUrl: string) => parsePrometheusText((await httpCall(`${baseUrl}/metrics`)).text);

/**
 * Runs one point: the load, the parity prompts sent once it is under way (after its warm-up, so
 * they share batches with the load), and the server's /metrics read before, during and after.
 */
export async function measurePoint(plan: LoadPlan, pointIndex: number, target: LoadTarget, baseUrl: string, parity: ParityProbe | undefined, progress: (message: string) => void): Promise<PointMeasurement> {
  const mode = plan.modes[pointIndex];
  const label = modeLabel(mode);
  const before = await scrape(baseUrl).catch(() => undefined);
  const running = runLoadPoint(target, {
    mode, requests: plan.requests, warmup: plan.warmup, durationS: plan.durationS, maxErrorRate: plan.maxErrorRate, seed: plan.seed + pointIndex,
  }, (done, all) => progress(`${label}: ${done}/${all} requests`));
  const underLoad = parity === undefined ? undefined : sleep(50).then(() => parity.ask(baseUrl, plan.apiKey));
  const gauges: GaugeSample[] = [];
  const startedMs = Date.now();
  const sampler = setInterval(() => {
    void scrape(baseUrl).then((m) => gauges.push({ t_ms: Date.now() - startedMs, slots_active: m.get("bench_slots_active") ?? NaN, queue_depth: m.get("bench_queue_depth") ?? NaN, in_flight: m.get("bench_in_flight") ?? NaN })).catch(() => undefined);
  }, GAUGE_EVERY_MS);
  const [result, parityResults] = await Promise.all([running, underLoad]).finally(() => clearInterval(sampler));
  const after = await scrape(baseUrl).catch(() => undefined);
  const serverDeltas = before === undefined || after === undefined ? null : Object.fromEntries(
    [...after.entries()].filter(([name]) => name.endsWith("_total")).map(([name, value]) => [name, value - (before.get(name) ?? 0)]));
  return { label, mode, result, parity: parityResults, serverDeltas, gauges };
}
