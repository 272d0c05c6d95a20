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
  /** Warm-up requests, not kept; in a closed loop at least one per client (warmupRequests). */
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
 * How many warm-up requests a point sends, and how many at once. A closed loop warms up at its own
 * concurrency, at least one request per client, so that every client's keep-alive connection is
 * open before the measured phase: otherwise each point's first requests on fresh connections (3 of
 * them at 4 clients) also time a TCP connect and a server's first request on a new socket, and at
 * 200 requests a point that is its p99 (docs/load-client.md). An open loop opens connections as its
 * arrivals need them: one at a time. A warm-up of 0 is none.
 */
export function warmupRequests(plan: Pick<LoadPointPlan, "mode" | "warmup">): { readonly count: number; readonly atOnce: number } {
  // No warm-up asked for (0) stays none: a caller timing cold connections on purpose.
  return plan.mode.kind === "closed" && plan.warmup > 0 ? { count: Math.max(plan.warmup, plan.mode.concurrency), atOnce: plan.mode.concurrency } : { count: plan.warmup, atOnce: 1 };
}

/**
 * Runs one load point. Warm-up requests go first and are not kept (warmupRequests). Closed loop:
 * `concurrency` workers, each sending its next request when the previous one ends. Open loop:
 * every request has a scheduled send time, and its latencies are measured from that time, so a
 * client that falls behind cannot hide a slow server (the lag is recorded too).
 */
export async function runLoadPoint(target: LoadTarget, plan: LoadPointPlan, onProgress?: (done: number, total: number) => void): Promise<LoadPointResult> {
  const endpoint = openStreamEndpoint(target.url, { apiKey: target.apiKey, stallTimeoutMs: target.stallTimeoutMs });
  const warmup = warmupRequests(plan);
  const send = (index: number, scheduledNs: bigint) => streamRequest(endpoint, index, JSON.stringify(target.body(warmup.count + index)), scheduledNs);
  try {
    // Without a warm-up the schedule starts in this turn (an open loop's send times count from here).
    if (warmup.count > 0) {
      let nextWarmup = 0;
      await Promise.all(Array.from({ length: Math.min(warmup.atOnce, warmup.count) }, async () => {
        for (let i = nextWarmup++; i < warmup.count; i = nextWarmup++) await streamRequest(endpoint, -1 - i, JSON.stringify(target.body(i)), process.hrtime.bigint());
      }));
    }
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
