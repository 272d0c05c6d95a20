/** The settings an arm may change, in the suite file's spelling. */
export interface ArmSettingsFile {
  readonly flash_attention?: boolean;
  readonly kv_cache_type?: "F32" | "F16";
  readonly threads?: number;
  readonly batch_size?: number;
  readonly context_size?: number;
  readonly prompt_overflow?: "error" | "truncate-left";
  /** Our server only: prompt tokens per llama_decode when it prefills (`bench serve --prefill-chunk`). */
  readonly prefill_chunk?: number;
}

export type GateLevel = "required" | "informational";

/**
 * An arm's memory check as a suite file declares it (docs/memory-budget.md#in-a-run): a gate level,
 * or the gate with the budget it is held to (a policy and a device: a name under budgets/ or a JSON
 * file; the fraction measured may exceed it by, and why that one). Undeclared, the arm has no memory check.
 */
export type MemoryDeclaration = GateLevel | { readonly gate: GateLevel; readonly policy?: string; readonly device?: string; readonly tolerance?: number; readonly why?: string };

/**
 * Bounds on a SUT's teacher-forced distribution against its oracle (docs/metrics.md), in the suite
 * file's spelling. Each bound present is one test; a bound absent is not tested. Greedy ids hide
 * what keeps the argmax (an output head scaled by 0.5 keeps top-1 at 100%); these do not.
 */
export interface DistributionBounds {
  readonly max_kld_mean?: number;
  readonly max_kld_p99?: number;
  readonly max_rms_delta_p?: number;
  readonly min_same_top?: number;
  readonly min_top1?: number;
}

/** One system under test in a suite: a model, its settings, and whether its gates are required. */
export interface SuiteArm {
  readonly label: string;
  readonly model: string;
  /** Parity suites: the model whose goldens this arm is held to, when not the suite's oracle (a suite spanning model families). */
  readonly oracle?: string;
  readonly sut?: "llamacpp" | "http" | "stdio";
  /**
   * stdio: the runner's argv; http: the argv of a server to start (default: ours), `{port}` a free
   * loopback port, `{llama-server}` the built llama-server, `{threads}` … the arm's numerics.
   * `{model}` becomes the model's path, `{bench}` the harness's directory.
   */
  readonly command?: readonly string[];
  /** http: a server someone else started; the arm's `model` names the GGUF it serves (its goldens, its tokenizer). */
  readonly url?: string;
  /** http: the environment variable holding the server's API key (read at run time, never recorded). */
  readonly api_key_env?: string;
  readonly settings?: ArmSettingsFile;
  readonly gate: GateLevel;
  readonly why?: string;
  /** Parity suites: this arm's own distribution bounds, each replacing the suite's (flash attention reorders sums: its floor is higher). */
  readonly distribution?: DistributionBounds;
  /** Its memory check (absent: none). */
  readonly memory?: MemoryDeclaration;
}

/** What every suite file has, whatever its kind, and where it was loaded from. */
export interface SuiteFile<Kind extends string, Arm> {
  readonly name: string;
  readonly kind: Kind;
  readonly description?: string;
  readonly arms: readonly Arm[];
  readonly case_timeout_s?: number;
  /** Where it was loaded from (not part of the file). */
  readonly path: string;
}

/** A parity suite exactly as its JSON file says (schema: suites/schema/parity.schema.json). */
export interface ParitySuite extends SuiteFile<"parity", SuiteArm> {
  readonly oracle: { readonly model: string };
  /** Another suite whose goldens this one's arms are held to (same prompts, T and K): a second set of arms without a second set of goldens. */
  readonly goldens_of?: string;
  readonly prompts: readonly string[];
  readonly max_tokens: number;
  readonly top_k: number;
  readonly band_mnats: number;
  readonly checks: {
    /** The SUT's own tokenizer must give the goldens' prompt ids (drift is its own check, not a parity failure). */
    readonly tokenizer?: GateLevel;
    readonly greedy_parity: GateLevel;
    readonly teacher_forced?: GateLevel;
    readonly determinism?: { readonly gate: GateLevel; readonly reruns: number };
    readonly batch_invariance?: GateLevel;
    /** Teacher-forced KLD, RMS Δp, same-top and top-1 held to bounds (arms may replace any bound). */
    readonly distribution?: { readonly gate: GateLevel } & DistributionBounds;
    /** A runner that declares a traced mode: its traced greedy ids must equal its eager ones (a difference is classified against the oracle). */
    readonly capture_parity?: GateLevel;
    /** Two captures of the traced decode graph must report the same demand bytes. */
    readonly capture_stable?: GateLevel;
  };
}

/** The suite name a parity suite's goldens are filed under: its own, or the one it borrows from. */
export function goldensSuiteName(suite: Pick<ParitySuite, "name" | "goldens_of">): string {
  return suite.goldens_of ?? suite.name;
}

/** The oracle model an arm of a parity suite is compared against. */
export function armOracle(suite: Pick<ParitySuite, "oracle">, arm: Pick<SuiteArm, "oracle">): string {
  return arm.oracle ?? suite.oracle.model;
}

/** Every oracle model a parity suite's arms are compared against, the suite's own first. */
export function suiteOracles(suite: ParitySuite): string[] {
  return [...new Set([suite.oracle.model, ...suite.arms.map((arm) => armOracle(suite, arm))])];
}
