import type { GateLevel, SuiteFile } from "./parity-suite.js";

export interface ConformanceArm {
  readonly label: string;
  readonly model?: string;
  readonly base_url?: string;
  readonly api_key?: string;
  readonly model_id?: string;
  readonly sut?: "http";
  readonly server?: { readonly slots?: number; readonly queue?: number; readonly simulate_boot_s?: number };
  readonly gate: GateLevel;
  readonly why?: string;
}

/** A server conformance suite (schema: suites/schema/conformance.schema.json). */
export interface ConformanceSuite extends SuiteFile<"conformance", ConformanceArm> {
  readonly checks: readonly string[];
}
