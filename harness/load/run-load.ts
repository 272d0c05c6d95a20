import { setTimeout as sleep } from "node:timers/promises";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { arrivalOffsets } from "./arrivals.js";
import { openStreamEndpoint, streamRequest, type RequestSample } from "./sse-request.js";

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
  /** A request whose server stays silent this long fails as a timeout (default 60 s). */
  readonly stallTimeoutMs?: number;
}

/** How busy the client process was during the measured phase: near 1, the client may be the limit. */
export interface ClientLoad {
  /** Fraction of the wall time the event loop was not idle (Node's eventLoopUtilization). */
  readonly eventLoopUtilization: number;
  /** p99 of how late the event loop ran timers, i.e. how late a response could be read. */
  readonly eventLoopDelayP99Ms: number;
}

export interface LoadPointResult {
  readonly samples: readonly RequestSample[];
  readonly durationS: number;
  readonly stoppedBy: "count" | "duration" | "error-rate";
  readonly client: ClientLoad;
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
  const endpoint = openStreamEndpoint(target.url, { apiKey: target.apiKey, stallTimeoutMs: target.stallTimeoutMs });
  const send = (index: number, scheduledNs: bigint) => streamRequest(endpoint, index, JSON.stringify(target.body(plan.warmup + index)), scheduledNs);
  try {
    for (let i = 0; i < plan.warmup; i++) await streamRequest(endpoint, -1 - i, JSON.stringify(target.body(i)), process.hrtime.bigint());
    const samples: RequestSample[] = [];
    let failed = 0;
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    const utilizationAtStart = performance.eventLoopUtilization();
    const startNs = process.hrtime.bigint();
    const deadlineNs = plan.durationS === undefined ? undefined : startNs + BigInt(Math.round(plan.durationS * 1e9));
    let stoppedBy: LoadPointResult["stoppedBy"] = "count";
    const stop = (): boolean => {
      if (deadlineNs !== undefined && process.hrtime.bigint() >= deadlineNs) { stoppedBy = "duration"; return true; }
      if (samples.length >= 10 && failed / samples.length > plan.maxErrorRate) { stoppedBy = "error-rate"; return true; }
      return false;
    };
    const record = (sample: RequestSample): void => {
      samples.push(sample);
      if (sample.status !== "ok") failed++;
      onProgress?.(samples.length, plan.requests);
    };
    if (plan.mode.kind === "closed") {
      let next = 0;
      await Promise.all(Array.from({ length: plan.mode.concurrency }, async () => {
        while (next < plan.requests && !stop()) {
          const index = next++;
          record(await send(index, process.hrtime.bigint()));
        }
      }));
    } else {
      const offsets = arrivalOffsets(plan.requests, plan.mode.rate, plan.mode.burstiness, plan.seed);
      const inFlight: Promise<void>[] = [];
      for (const [index, offset] of offsets.entries()) {
        if (stop()) break;
        const scheduledNs = startNs + BigInt(Math.round(offset * 1e9));
        const waitMs = Number(scheduledNs - process.hrtime.bigint()) / 1e6;
        if (waitMs > 0) await sleep(waitMs);
        inFlight.push(send(index, scheduledNs).then(record));
      }
      await Promise.all(inFlight);
    }
    const durationS = Number(process.hrtime.bigint() - startNs) / 1e9;
    delay.disable();
    const client = { eventLoopUtilization: performance.eventLoopUtilization(utilizationAtStart).utilization, eventLoopDelayP99Ms: delay.percentile(99) / 1e6 };
    samples.sort((a, b) => a.index - b.index);
    return { samples, durationS, stoppedBy, client };
  } finally {
    await endpoint.pool.close();
  }
}
