import { arrivalOffsets } from "./arrivals.js";
import { streamRequest, type RequestSample } from "./sse-request.js";

export type LoadMode =
  | { readonly kind: "closed"; readonly concurrency: number }
  | { readonly kind: "open"; readonly rate: number; readonly burstiness: number };

export interface LoadPointPlan {
  readonly mode: LoadMode;
  /** Measured requests (after warm-up). */
  readonly requests: number;
  readonly warmup: number;
  /** Stop sending new requests after this many seconds (undefined: no limit). */
  readonly durationS?: number;
  /** Stop once more than this fraction of at least 10 finished requests failed. */
  readonly maxErrorRate: number;
  readonly seed: number;
}

export interface LoadTarget {
  readonly url: string;
  readonly apiKey?: string;
  readonly body: (index: number) => unknown;
}

export interface LoadPointResult {
  readonly samples: readonly RequestSample[];
  readonly durationS: number;
  readonly stoppedBy: "count" | "duration" | "error-rate";
}

export function modeLabel(mode: LoadMode): string {
  return mode.kind === "closed" ? `concurrency ${mode.concurrency}` : `rate ${mode.rate}/s${mode.burstiness === 1 ? " (Poisson)" : ` (gamma, burstiness ${mode.burstiness})`}`;
}

/**
 * Runs one load point. Warm-up requests go first, one at a time, and are not kept. Closed loop:
 * `concurrency` workers, each sending its next request when the previous one ends. Open loop:
 * every request has a scheduled send time, and its latencies are measured from that time, so a
 * client that falls behind cannot hide a slow server (the lag is recorded too).
 */
export async function runLoadPoint(target: LoadTarget, plan: LoadPointPlan, onProgress?: (done: number, total: number) => void): Promise<LoadPointResult> {
  for (let i = 0; i < plan.warmup; i++) await streamRequest(-1 - i, target.url, target.body(i), process.hrtime.bigint(), target.apiKey);
  const samples: RequestSample[] = [];
  const startNs = process.hrtime.bigint();
  const deadlineNs = plan.durationS === undefined ? undefined : startNs + BigInt(Math.round(plan.durationS * 1e9));
  let stoppedBy: LoadPointResult["stoppedBy"] = "count";
  const stop = (): boolean => {
    if (deadlineNs !== undefined && process.hrtime.bigint() >= deadlineNs) { stoppedBy = "duration"; return true; }
    const failed = samples.filter((s) => s.status !== "ok").length;
    if (samples.length >= 10 && failed / samples.length > plan.maxErrorRate) { stoppedBy = "error-rate"; return true; }
    return false;
  };
  const record = (sample: RequestSample): void => {
    samples.push(sample);
    onProgress?.(samples.length, plan.requests);
  };
  if (plan.mode.kind === "closed") {
    let next = 0;
    await Promise.all(Array.from({ length: plan.mode.concurrency }, async () => {
      while (next < plan.requests && !stop()) {
        const index = next++;
        record(await streamRequest(index, target.url, target.body(plan.warmup + index), process.hrtime.bigint(), target.apiKey));
      }
    }));
  } else {
    const offsets = arrivalOffsets(plan.requests, plan.mode.rate, plan.mode.burstiness, plan.seed);
    const inFlight: Promise<void>[] = [];
    for (const [index, offset] of offsets.entries()) {
      if (stop()) break;
      const scheduledNs = startNs + BigInt(Math.round(offset * 1e9));
      const waitMs = Number(scheduledNs - process.hrtime.bigint()) / 1e6;
      if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
      inFlight.push(streamRequest(index, target.url, target.body(plan.warmup + index), scheduledNs, target.apiKey).then(record));
    }
    await Promise.all(inFlight);
  }
  samples.sort((a, b) => a.index - b.index);
  return { samples, durationS: Number(process.hrtime.bigint() - startNs) / 1e9, stoppedBy };
}
