import type { GateLevel, SuiteFile } from "./parity-suite.js";

/** One speculating server: its plain command, and what turns speculation on. */
export interface SpeculativeArm {
  readonly label: string;
  /** The target model (fixture[:QUANT] or .gguf): `{model}` in the command. */
  readonly model: string;
  /** The draft model, for draft-model speculation: `{draft}` in `speculation`. */
  readonly draft?: string;
  /** The argv of the server without speculation (no shell; `{port}`, `{model}`, `{llama-server}` filled as in any server arm). */
  readonly command: readonly string[];
  /** Arguments appended to `command` to turn speculation on: the two servers differ in these alone. */
  readonly speculation: readonly string[];
  readonly gate: GateLevel;
  readonly why?: string;
}

/**
 * Greedy output with speculation on, held token for token to the same server's without it
 * (schema: suites/schema/speculative.schema.json).
 */
export interface SpeculativeSuite extends SuiteFile<"speculative", SpeculativeArm> {
  /** The parity suite whose prompts are asked. */
  readonly prompts_of: string;
  /** Continuation lengths each prompt is asked for (a long one lets rejections happen mid-sequence). */
  readonly max_tokens: readonly number[];
  /** Requests in flight at once in the concurrent pass (the server's command must give it as many slots). */
  readonly concurrency: number;
  readonly checks: { readonly speculative_greedy: GateLevel };
}
