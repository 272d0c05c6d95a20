import type { BudgetRequest } from "../budget/arithmetic.js";
import type { DeviceAllocations } from "../budget/memory-gate.js";
import type { CpuIdentity } from "../cpu/cpu-identity.js";
/**
 * The system-under-test interface: small, batch-shaped, capability-declaring. Every method takes
 * a whole batch of immutable requests; a capability a SUT lacks is simply absent, and a suite that
 * needs it is SKIPPED with the reason, never passed.
 */

import type { KernelTensor } from "../../kernels/ops/tensor.js";

export type TokenId = number;

/** Top-k of one next-token distribution, sorted by log-prob descending (ties: lower id first). */
export interface TopK {
  readonly ids: readonly TokenId[];
  /** Natural-log probabilities (log-softmax) of `ids`. */
  readonly logprobs: readonly number[];
}

export interface GreedyRequest {
  /** Prompt ids including BOS, exactly as the SUT must be fed them. */
  readonly promptIds: readonly TokenId[];
  /** The answer holds exactly this many ids, unless it ends early on one of `eosIds`. */
  readonly maxTokens: number;
  /** End-of-sequence ids that may end the answer before `maxTokens` (none: the SUT must ignore EOS). */
  readonly eosIds?: readonly TokenId[];
}

/** A greedy request with the server's prompt cache on or off (reuse suites): one request, sent as given. */
export interface CachedGreedyRequest extends GreedyRequest {
  /** false: the server must evaluate the whole prompt afresh (llama.cpp's `cache_prompt`), the cold answer. */
  readonly cachePrompt: boolean;
  /** Pin the request to this slot (llama.cpp's `id_slot`); absent: the server chooses. */
  readonly slot?: number;
  /** Also return the top-k of each generated token's distribution (before sampling), where the server gives it. */
  readonly topK?: number;
}

/** What a server says about one cached-greedy request besides its ids. */
export interface CachedGreedyAnswer {
  readonly ids: TokenId[];
  /** Prompt tokens the server says it took from its cache (usage cached_tokens, llama.cpp timings.cache_n); undefined: it does not say. */
  readonly cachedTokens: number | undefined;
  /** The server's own prompt-processing time, where it reports one (llama.cpp timings.prompt_ms). */
  readonly promptMs: number | undefined;
  /** Top-k per generated token, when asked and given. */
  readonly topK?: TopK[];
}

/** One message of a chat, as OpenAI's chat API takes it. */
export interface ChatMessage {
  readonly role: "system" | "user" | "assistant";
  readonly content: string;
}

/** A greedy chat request with the server's prompt cache on or off (the multi-turn-chat reuse scenario). */
export interface CachedChatRequest {
  readonly messages: readonly ChatMessage[];
  readonly maxTokens: number;
  readonly cachePrompt: boolean;
}

/** A chat answer: its text (chat APIs give no ids), and what the server says of its prompt. */
export interface CachedChatAnswer {
  readonly text: string;
  /** Tokens of the prompt the server rendered from the messages, where it says (usage.prompt_tokens). */
  readonly promptTokens: number | undefined;
  readonly cachedTokens: number | undefined;
}

/** Slot save/restore (llama.cpp's `/slots/N?action=save|restore`, which needs `--slot-save-path`). */
export type SlotAction = "save" | "restore";

export interface TeacherForcedRequest {
  /** Prompt ids including BOS. */
  readonly promptIds: readonly TokenId[];
  /** Continuation fed one by one; the SUT returns the distribution before each of these tokens. */
  readonly continuationIds: readonly TokenId[];
  readonly k: number;
}

/** Who and what the SUT is: recorded with every result so a number can be traced to its source. */
export interface SutProvenance {
  readonly kind: string;
  readonly modelPath?: string;
  readonly modelSha256?: string;
  readonly modelBytes?: number;
  /**
   * The artifact the SUT itself says it loaded (our server's /v1/models, a runner's hello), or the
   * file the harness loaded itself (the embedded SUT). Absent: the SUT cannot say, and its identity
   * is unverified.
   */
  readonly loadedModel?: LoadedModel;
  /** Engine name and version, e.g. node-llama-cpp 3.21.1 / llama.cpp b6xxx. */
  readonly engine: string;
  /** Settings that change numerics (flash attention, KV cache type, threads, batch size …). */
  readonly settings: Readonly<Record<string, string | number | boolean>>;
  /** Where an embedded llama.cpp computed: the CPU and the ggml CPU library it ran (numerics differ between them). */
  readonly cpu?: CpuIdentity;
}

/** What a token is, as far as a suite needs to know: text, a byte-fallback piece, unknown, or control. */
export interface LoadedModel {
  readonly sha256: string;
  /** The file name as the SUT reports it (no directories). */
  readonly file: string;
  /** Who says so: the SUT, or the harness that loaded the file itself. */
  readonly reportedBy: string;
}

export type TokenKind = "text" | "byte" | "unknown" | "control";

/** A server's cumulative prompt-token counters: on an honest server, every admitted token was either taken from its cache or evaluated. */
export interface PromptCounters {
  readonly total: number;
  readonly cached: number;
  readonly evaluated: number;
}

/** Trace-region demand of one captured graph (docs/metrics.md), as a SUT that captures graphs reports it. */
export interface TraceCapture {
  readonly capture: string;
  readonly demandBytes: number;
  readonly regionBytes: number;
  /** Fixed per bank, fixed total budget, or dynamic (size 0): tt-metal changed this once, so it is recorded. */
  readonly regionSemantics: "fixed-per-bank" | "fixed-total" | "dynamic";
}

/**
 * What a SUT says it allocated, by the memory gate's groups (docs/memory-budget.md), per device:
 * steady (held between requests) and peak; and the shape it allocated for (context per slot, slots,
 * ubatch, and its KV bytes per element where its policy's do not apply), which its budget is made for.
 */
export interface AllocationReport {
  readonly devices: readonly DeviceAllocations[];
  readonly shape: BudgetRequest & { readonly kvBytesPerElement?: number };
}

/** Why a SUT's allocations are not measured: it cannot be asked (a server without the report). Never a pass. */
export interface NotMeasured {
  readonly notMeasured: string;
}

/** An (op, encoding) pair a kernel SUT registers (docs/kernel-ops.md); encoding is "<IN>:<OUT>". */
export interface KernelPair {
  readonly op: string;
  readonly encoding: string;
  /** The arithmetic the kernel accumulates in, when it is not float32: its bounds use that unit roundoff. */
  readonly accumulation?: Accumulation;
}

/** Arithmetic a kernel may declare (docs/kernel-bounds.md): the unit roundoff its bounds are derived with. */
export const ACCUMULATION_UNIT_ROUNDOFF = { f32: 2 ** -24, bf16: 2 ** -8, f16: 2 ** -11 } as const;
export type Accumulation = keyof typeof ACCUMULATION_UNIT_ROUNDOFF;

/** One kernel call: the op, its encoding, its inputs, its sentinel-filled outputs and its attributes. */
export interface KernelRequest {
  readonly op: string;
  readonly encoding: string;
  readonly inputs: readonly KernelTensor[];
  readonly outputs: readonly KernelTensor[];
  readonly attrs: Readonly<Record<string, number | string | boolean>>;
}

/** How long to time a kernel: warm up, then sample calls until both minimums are met (or the cap). */
export interface KernelTimingPlan {
  readonly warmupMs: number;
  readonly minSamples: number;
  readonly minTimeMs: number;
  readonly maxSamples: number;
}

/** Nanoseconds per call as the SUT's host measured them, and (a plugin) as its own tight C loop did for the same call. */
export interface KernelTiming {
  /** One sample per batch of `callsPerSample` calls: the batch's mean. */
  readonly hostNs: Float64Array;
  readonly inPluginNs?: Float64Array;
  readonly callsPerSample: number;
}

/** How special tokens are treated when text becomes ids (llama.cpp's add_special and parse_special). */
export interface SpecialTokenOptions {
  readonly addSpecial: boolean;
  readonly parseSpecial: boolean;
}

export type Capability = "tokenize" | "detokenize" | "tokenizeSpecial" | "detokenizeSpecial" | "inspectTokens" | "greedy" | "tracedGreedy" | "teacherForcedTopK" | "batchedGreedy" | "cachedGreedy" | "cachedChat" | "slotAction" | "traceDemand" | "allocations" | "kernel" | "kernelTime";

export interface SystemUnderTest {
  /** Short label used in summary lines, e.g. `llamacpp tiny-random:Q4_K`. */
  readonly label: string;
  readonly provenance: SutProvenance;

  /** Text to ids, BOS included, as this SUT's tokenizer does it. */
  tokenize?(texts: readonly string[]): Promise<TokenId[][]>;
  /** Ids to text, for each sequence (BOS and control tokens drop out). */
  detokenize?(sequences: readonly (readonly TokenId[])[]): Promise<string[]>;
  /**
   * Text to ids with both of a tokenizer's special-token choices said: `addSpecial` adds what the
   * vocabulary adds (BOS, EOS), `parseSpecial` reads special-token text as the special token. What a
   * tokenizer suite holds to llama.cpp's tokenizer, id for id.
   */
  tokenizeSpecial?(texts: readonly string[], options: SpecialTokenOptions): Promise<TokenId[][]>;
  /** Ids to text, special tokens rendered as their text (`renderSpecial`) or dropped. */
  detokenizeSpecial?(sequences: readonly (readonly TokenId[])[], options: { readonly renderSpecial: boolean }): Promise<string[]>;
  /** The kind of each id (to refuse text a tokenizer can only spell in byte-fallback pieces). */
  inspectTokens?(ids: readonly TokenId[]): Promise<TokenKind[]>;
  /** Greedy (temperature 0) continuations, each prompt evaluated alone. */
  greedy?(requests: readonly GreedyRequest[]): Promise<TokenId[][]>;
  /**
   * Greedy continuations through the SUT's traced (captured and replayed) decode graph, each prompt
   * alone: held to the eager `greedy` ids by capture_parity.
   */
  tracedGreedy?(requests: readonly GreedyRequest[]): Promise<TokenId[][]>;
  /** Greedy continuations with all requests in flight together (several sequences in one batch). */
  batchedGreedy?(requests: readonly GreedyRequest[]): Promise<TokenId[][]>;
  /** Teacher-forced top-k: one TopK per continuation token, for each request. */
  teacherForcedTopK?(requests: readonly TeacherForcedRequest[]): Promise<TopK[][]>;
  /** One greedy request to a server that may reuse its prompt cache, with what it reports of that reuse. */
  cachedGreedy?(request: CachedGreedyRequest): Promise<CachedGreedyAnswer>;
  /** One greedy chat completion, with the cache on or off, and what the server reports of its prompt. */
  cachedChat?(request: CachedChatRequest): Promise<CachedChatAnswer>;
  /** Saves a slot's state to a file the server names `name`, or restores it from there. */
  slotAction?(slot: number, action: SlotAction, name: string): Promise<void>;
  /** Trace-region demand of the graphs it captured so far (asked once an arm's checks are done). */
  traceDemand?(): Promise<TraceCapture[]>;
  /** What it allocated, by category and device (asked once an arm's checks are done); NotMeasured where it cannot be asked. */
  allocations?(): Promise<AllocationReport | NotMeasured>;
  /** The server's own running counts of prompt tokens (admitted, taken from its cache, evaluated), where it exports them; undefined where it does not. */
  promptCounters?(): Promise<PromptCounters | undefined>;
  /** Owned kernels (a native plugin, or a runner's): the (op, encoding) pairs it registers; any other is refused by name. */
  readonly kernelPairs?: readonly KernelPair[];
  /** Runs one registered kernel; resolves to its answer, `[{name, data: bytes}]` per output in the request's order (checked in answer-shape.ts). */
  kernel?(request: KernelRequest): Promise<unknown>;
  /** Times one registered kernel (docs/kernel-ops.md): per-call nanoseconds. */
  kernelTime?(request: KernelRequest, plan: KernelTimingPlan): Promise<KernelTiming>;

  /** Why a capability is absent, where the SUT found out (an HTTP server's dialect probes): the skip reason names it. */
  readonly unsupported?: Readonly<Partial<Record<Capability, string>>>;

  /**
   * The per-case timeout gave up on the calls made so far (harness/sut/with-timeout.ts): an
   * in-process SUT, whose work cannot be killed with a process, stops them at their next step, so
   * the next call does not share its state with an abandoned one; an HTTP SUT aborts their requests,
   * so no connection is left waiting on a server that stopped answering. Absent: nothing to stop.
   */
  abandon?(): void;

  /** Releases the SUT (engine, processes); safe to call twice. */
  close(): Promise<void>;
}

export function hasCapability(sut: SystemUnderTest, capability: Capability): boolean {
  return typeof sut[capability] === "function";
}
