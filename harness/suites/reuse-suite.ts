import type { DistributionBounds, SuiteArm, SuiteFile } from "./parity-suite.js";

/** The scenarios a reuse suite can run (docs/state-reuse.md): each a sequence of requests whose last answer is held to a cold one. */
export const REUSE_SCENARIOS = ["prefix", "divergence", "multi-turn", "multi-turn-chat", "concurrent", "slot-restore"] as const;
export type ReuseScenarioKind = (typeof REUSE_SCENARIOS)[number];

/** A server arm of a reuse suite: the parity arm's fields, and what its cache promises. */
export interface ReuseArm extends Omit<SuiteArm, "oracle"> {
  /**
   * The least fraction of the reusable prompt tokens the server must report cached, per scenario
   * kind (e.g. `{ "prefix": 0.9 }`): declared, `reuse_efficacy` is required on this arm and fails below it.
   */
  readonly expect_reuse?: Partial<Record<ReuseScenarioKind, number>>;
  /**
   * Another arm of the suite on the same model, prefilling in other chunks (or whole), run before
   * this one: every final prompt both asked must get the same answers (`reuse_prefill`, required).
   */
  readonly prefill_reference?: string;
}

/** A reuse suite exactly as its JSON file says (schema: suites/schema/reuse.schema.json). */
export interface ReuseSuite extends SuiteFile<"reuse", ReuseArm> {
  /** The body every scenario's prompts are cut from (each scenario puts its own tag in front, so no two share more than a few tokens). */
  readonly text: string;
  /** Text a prompt continues with after it leaves `text`: the divergent tail, the next turn, the distinct suffix of each concurrent request. */
  readonly other_text: string;
  /** Tokens of a scenario's base prompt (BOS included). */
  readonly prompt_tokens: number;
  /** Tokens of the new text a multi-turn or restored request adds. */
  readonly turn_tokens: number;
  readonly max_tokens: number;
  /** Where prefix and divergence scenarios split: `N`, or `ubatch` / `window` with an optional factor and offset (`2*ubatch+1`, `window-1`). */
  readonly split_points: readonly string[];
  readonly scenarios: readonly ReuseScenarioKind[];
  /** Requests in flight at once in the concurrent scenario. */
  readonly concurrency: number;
  /** Ask for this many log-probs per generated token and hold hit to cold within `distribution` (where the server gives them). */
  readonly top_k?: number;
  readonly distribution?: DistributionBounds;
}
