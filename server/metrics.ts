import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { EngineObserver, FinishReason } from "./generation.js";
import type { HostCacheStats } from "./host-prompt-cache.js";

/** The production server's /metrics (the series the field's production servers expose; docs/servers.md, `GET /metrics`), as Prometheus text through prom-client. */
export class ServerMetrics {
  readonly registry = new Registry();
  private readonly submitted = new Counter({ name: "bench_requests_submitted_total", help: "Requests accepted into the queue", registers: [this.registry] });
  private readonly done = new Counter({ name: "bench_requests_done_total", help: "Requests finished (stop or length)", registers: [this.registry] });
  private readonly cancelled = new Counter({ name: "bench_requests_cancelled_total", help: "Requests cancelled (client disconnect)", registers: [this.registry] });
  private readonly errored = new Counter({ name: "bench_requests_errored_total", help: "Requests the engine failed (answered 500 or an error event)", registers: [this.registry] });
  private readonly rejected = new Counter({ name: "bench_requests_rejected_total", help: "Requests rejected with 429 at the in-flight cap", registers: [this.registry] });
  private readonly promptTokens = new Counter({ name: "bench_prompt_tokens_total", help: "Prompt tokens admitted to a slot (cached or evaluated)", registers: [this.registry] });
  private readonly promptTokensCached = new Counter({ name: "bench_prompt_tokens_cached_total", help: "Prompt tokens reported cached: not evaluated because the slot's prompt cache held them", registers: [this.registry] });
  // With the two above: prompt = cached + evaluated on a server whose report is true.
  private readonly promptTokensEvaluated = new Counter({ name: "bench_prompt_tokens_evaluated_total", help: "Prompt tokens evaluated (prefilled)", registers: [this.registry] });
  private readonly tokens = new Counter({ name: "bench_tokens_generated_total", help: "Tokens generated", registers: [this.registry] });
  private readonly drafted = new Counter({ name: "bench_draft_tokens_total", help: "Tokens a draft model proposed (speculative decoding)", registers: [this.registry] });
  private readonly draftAccepted = new Counter({ name: "bench_draft_tokens_accepted_total", help: "Drafted tokens the target kept", registers: [this.registry] });
  private readonly ttft = new Histogram({ name: "bench_ttft_seconds", help: "Time from admission to the first generated token", buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10], registers: [this.registry] });
  private readonly stepTime = new Histogram({ name: "bench_step_seconds", help: "Wall time of one engine step (prefill batch + decode batch)", buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1], registers: [this.registry] });
  // Not `_total`: that suffix is for counters (Prometheus naming; promtool rejects it on a gauge).
  readonly slots = new Gauge({ name: "bench_slots", help: "Slots (sequences) in the engine", registers: [this.registry] });
  private readonly slotsActive = new Gauge({ name: "bench_slots_active", help: "Slots holding a request", registers: [this.registry] });
  private readonly queueDepth = new Gauge({ name: "bench_queue_depth", help: "Requests waiting for a slot", registers: [this.registry] });
  readonly inFlight = new Gauge({ name: "bench_in_flight", help: "Requests queued or in a slot", registers: [this.registry] });
  private readonly hostBytes = new Gauge({ name: "bench_prompt_cache_host_bytes", help: "Bytes of slot states kept in the host prompt cache (--cache-ram)", registers: [this.registry] });
  private readonly hostEntries = new Gauge({ name: "bench_prompt_cache_host_entries", help: "Slot states kept in the host prompt cache", registers: [this.registry] });
  private readonly hostStores = new Counter({ name: "bench_prompt_cache_host_stores_total", help: "Slot states stored in the host prompt cache", registers: [this.registry] });
  private readonly hostHits = new Counter({ name: "bench_prompt_cache_host_hits_total", help: "Slot states restored from the host prompt cache into a slot", registers: [this.registry] });
  private readonly hostEvictions = new Counter({ name: "bench_prompt_cache_host_evictions_total", help: "Host prompt cache entries dropped to stay within its size", registers: [this.registry] });
  /** The host cache's counts at the last refresh: its counters move by the difference. */
  private hostCounted: HostCacheStats = { bytes: 0, entries: 0, stores: 0, hits: 0, evictions: 0 };

  readonly observer: EngineObserver = {
    submitted: () => this.submitted.inc(),
    rejected: () => this.rejected.inc(),
    errored: () => this.errored.inc(),
    finished: (reason: FinishReason, ttftSeconds: number | undefined, generated: number) => {
      (reason === "cancelled" ? this.cancelled : this.done).inc();
      this.tokens.inc(generated);
      if (ttftSeconds !== undefined) this.ttft.observe(ttftSeconds);
    },
    prompt: (tokens: number, cached: number, evaluated: number) => {
      this.promptTokens.inc(tokens);
      this.promptTokensCached.inc(cached);
      this.promptTokensEvaluated.inc(evaluated);
    },
    speculated: (drafted: number, accepted: number) => {
      this.drafted.inc(drafted);
      this.draftAccepted.inc(accepted);
    },
    step: (seconds: number, activeSlots: number, queueDepth: number) => {
      this.stepTime.observe(seconds);
      this.slotsActive.set(activeSlots);
      this.queueDepth.set(queueDepth);
    },
  };

  /** Gauges that must be exact at scrape time, refreshed from the engine. */
  refresh(state: { activeSlots: number; queueDepth: number; inFlight: number; hostCache: HostCacheStats | undefined }): void {
    this.slotsActive.set(state.activeSlots);
    this.queueDepth.set(state.queueDepth);
    this.inFlight.set(state.inFlight);
    const host = state.hostCache;
    if (host === undefined) return;
    this.hostBytes.set(host.bytes);
    this.hostEntries.set(host.entries);
    this.hostStores.inc(host.stores - this.hostCounted.stores);
    this.hostHits.inc(host.hits - this.hostCounted.hits);
    this.hostEvictions.inc(host.evictions - this.hostCounted.evictions);
    this.hostCounted = host;
  }
}
