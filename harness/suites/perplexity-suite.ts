import type { GateLevel, SuiteArm, SuiteFile } from "./parity-suite.js";

/**
 * Bounds on an arm's corpus statistics against the base model's (docs/perplexity.md). Each bound
 * present is one test; absent, not tested. Names as llama-perplexity prints the quantities.
 */
export interface PerplexityBounds {
  /** |ln(PPL(arm)/PPL(base))|: the arm's perplexity may move either way by at most this, in nats. */
  readonly max_abs_ln_ppl_ratio?: number;
  readonly max_kld_mean?: number;
  readonly max_kld_p99?: number;
  /** RMS of Δp = p_arm(next) − p_base(next), as a fraction (llama-perplexity prints it in %). */
  readonly max_rms_delta_p?: number;
  /** "Same top p": the fraction of positions whose argmax equals the base's. */
  readonly min_same_top?: number;
}

/** One model scored on the corpus; its statistics are taken against the suite's base model. */
export interface PerplexityArm extends Pick<SuiteArm, "label" | "model" | "settings" | "gate" | "why"> {
  readonly bounds?: PerplexityBounds;
  /**
   * The corpus the bounds were measured on (sha256 of its text, as the goldens record it). A
   * quantized arm's statistics move with the text (Q4_K's same top: 72.2 % on our prose, 68.7 % on
   * license texts), so on another corpus its bounds are not tested: the check is SKIPPED and says
   * what the measurement gives there. Absent: the bounds hold on any text.
   */
  readonly bounds_corpus_sha256?: string;
}

/** Corpus perplexity and KL divergence as llama-perplexity computes them (schema: suites/schema/perplexity.schema.json). */
export interface PerplexitySuite extends SuiteFile<"perplexity", PerplexityArm> {
  /** The corpus, a UTF-8 text file relative to the suite file (one trailing newline is dropped, as llama-perplexity's -f does). */
  readonly corpus: string;
  /** The base model whose log-probs are the goldens (fixture[:QUANT] or .gguf). */
  readonly base: { readonly model: string };
  /** Tokens per chunk (llama-perplexity's -c): the first half of each chunk is context, the rest is scored. */
  readonly n_ctx: number;
  /** Chunks scored (llama-perplexity's --chunks); the corpus must hold n_ctx × chunks tokens. */
  readonly chunks: number;
  /** Base log-probs kept per scored position (the top K); the rest of the vocabulary's mass is bounded, not stored. */
  readonly top_k: number;
  /** The level of the bounds check on every arm (an arm's own gate may lower it). */
  readonly gate: GateLevel;
}
