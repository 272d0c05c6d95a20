import type { GateLevel, MemoryDeclaration, SuiteFile } from "./parity-suite.js";

export interface ConformanceArm {
  readonly label: string;
  readonly model?: string;
  readonly url?: string;
  /** The environment variable holding the server's API key (read at run time, never recorded). */
  readonly api_key_env?: string;
  /** A server to start instead of ours (see SuiteArm.command). */
  readonly command?: readonly string[];
  /** Prometheus series this server promises in /metrics (ours: its bench_* names); none: any valid exposition passes. */
  readonly expect_metrics?: readonly string[];
  readonly model_id?: string;
  readonly sut?: "http";
  /** Our server's bounds: a declared queue promises 429 beyond slots + queue; without it, queueing (OpenAI allows it) passes too. */
  readonly server?: { readonly slots?: number; readonly queue?: number; readonly simulate_boot_s?: number };
  /** How far this server's reports of one log-prob may differ (greedy_logprobs, greedy_logprobs_echo); absent: float32's default, DEFAULT_LOGPROB_TOLERANCE. */
  readonly logprob_tolerance?: { readonly abs: number; readonly rel: number };
  readonly gate: GateLevel;
  readonly why?: string;
  /** Its memory check (absent: none). */
  readonly memory?: MemoryDeclaration;
}

/** A server conformance suite (schema: suites/schema/conformance.schema.json). */
export interface ConformanceSuite extends SuiteFile<"conformance", ConformanceArm> {
  readonly checks: readonly string[];
}
