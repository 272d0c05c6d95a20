import type { PromptCacheSettings } from "./prompt-cache.js";
import type { SpeculationSettings } from "./speculation.js";

/** What `bench serve` tells its HTTP face: who it is, its limits, and the settings /v1/models reports. */
export interface ServerOptions {
  readonly host: string;
  readonly port: number;
  readonly modelId: string;
  readonly apiKey?: string;
  readonly maxPromptTokens: number;
  readonly maxTokensCap: number;
  /** Whether a passing validation run exists for this exact artifact; shown in /v1/models. */
  readonly validation: { readonly validated: boolean; readonly run?: string; readonly note: string };
  /** What the engine computes with, shown in /v1/models so a client records what it measured rather than what it asked for. */
  readonly numerics: ServerNumerics;
  /** The prompt cache's settings, shown in /v1/models beside the numerics so a run records what it ran. */
  readonly cache: PromptCacheSettings;
  /** The draft model and its draft length when the server speculates, shown in /v1/models too. */
  readonly speculation?: SpeculationSettings;
}

/** The model file served, hashed while booting: /v1/models reports it so a client can tell which artifact answers it. */
export interface ServedArtifact {
  readonly file: string;
  readonly sha256: string;
}

/** The settings that change the engine's numerics, in the suite files' spelling. */
export interface ServerNumerics {
  readonly flash_attention: boolean;
  readonly kv_cache_type: "F32" | "F16";
  readonly threads: number;
  readonly batch_size: number;
  /** Tokens per slot. */
  readonly context_size: number;
  readonly slots: number;
}
