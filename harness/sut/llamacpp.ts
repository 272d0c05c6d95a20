import { availableParallelism } from "node:os";
import { readFileSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import { createRequire } from "node:module";
import type { Llama, LlamaContext, LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import { cpuIdentity, forcedCpuVariant, loadedCpuVariant } from "../cpu/cpu-identity.js";
import { BenchError } from "../errors.js";
import { readGguf } from "../gguf/read.js";
import { validateLlamaMetadata } from "../gguf/llama-metadata.js";
import { sha256File } from "../io/sha256.js";
import { captureBufferLines, llamaCppAllocationReport } from "./llamacpp-buffer-capture.js";
import { reachNativeContext, releaseNativeContext, sequenceIdOf, teacherForceInEmptySequence, type NativeContext } from "./llamacpp-native-context.js";
import { topKFromProbabilities } from "./topk.js";
import type { AllocationReport, GreedyRequest, SutProvenance, SystemUnderTest, TeacherForcedRequest, TokenId, TokenKind, TopK } from "./types.js";

/** Settings that change what llama.cpp computes or how fast; all recorded in provenance. */
export interface LlamaCppSettings {
  /** Off for oracles: with it on, results depend on how tokens were batched. */
  readonly flashAttention: boolean;
  /** F32 gets within ~3e-7 of a float64 reference; F16 is llama.cpp's default. */
  readonly kvCacheType: "F32" | "F16";
  /** Explicit: llama.cpp's default of 4 on a 2-core machine collapses throughput ~300x. */
  readonly threads: number;
  readonly batchSize: number;
  /** Tokens per sequence; each sequence has its own cells, so sequences never evict each other. */
  readonly contextSize: number;
  /** Parallel sequences in the context (batched greedy uses one per request). */
  readonly sequences: number;
  /**
   * A prompt that does not fit: "error" refuses it; "truncate-left" keeps BOS and the most recent
   * tokens, as many servers do (and silently lose what was cut: a planted fault for long context).
   */
  readonly promptOverflow: "error" | "truncate-left";
  /** Our server only: prompt tokens per llama_decode when it prefills (absent: its batch size). */
  readonly prefillChunk?: number;
}

/** The oracle recipe: deterministic and batch-invariant. */
export const ORACLE_SETTINGS: LlamaCppSettings = {
  flashAttention: false,
  kvCacheType: "F32",
  threads: 1,
  batchSize: 512,
  contextSize: 1024,
  sequences: 1,
  promptOverflow: "error",
};

/** node-llama-cpp's package directory: the package hides package.json behind "exports", so it is found beside the resolved entry point. */
const NODE_LLAMA_CPP_ROOT: string = (() => {
  const entry = createRequire(import.meta.url).resolve("node-llama-cpp");
  return entry.slice(0, entry.lastIndexOf("/node_modules/node-llama-cpp/") + "/node_modules/node-llama-cpp/".length);
})();

const NODE_LLAMA_CPP_VERSION: string = (JSON.parse(readFileSync(join(NODE_LLAMA_CPP_ROOT, "package.json"), "utf8")) as { version: string }).version;

/**
 * The commit of the llama.cpp source node-llama-cpp bundles (llama/gitRelease.bundle, whose header
 * line names it: "<sha> HEAD"), which its binaries are built from; undefined where the package ships none.
 */
const BUNDLED_LLAMA_CPP_COMMIT: string | undefined = (() => {
  try {
    const header = readFileSync(join(NODE_LLAMA_CPP_ROOT, "llama", "gitRelease.bundle")).subarray(0, 512).toString("latin1");
    return /^([0-9a-f]{40}) HEAD$/m.exec(header)?.[1];
  } catch {
    return undefined;
  }
})();

let llamaInstance: Promise<Llama> | undefined;

/**
 * One llama.cpp runtime per process, CPU only, prebuilt binaries (nothing is downloaded or built;
 * the install registers them as tested on this machine, scripts/trust-llama-binary.js).
 * node-llama-cpp is imported here, on first use, not with this module: importing it costs about
 * 0.4 s of CPU, which a run whose arms are all runners, servers or plugins never needs.
 */
export function llamaRuntime(): Promise<Llama> {
  llamaInstance ??= import("node-llama-cpp").then(async ({ getLlama, LlamaLogLevel }) => {
    const llama = await getLlama({ gpu: false, build: "never", maxThreads: availableParallelism(), logLevel: LlamaLogLevel.error });
    // A forced variant that did not take would put another CPU's numbers under its name.
    const forced = forcedCpuVariant();
    const loaded = loadedCpuVariant();
    if (forced !== undefined && loaded !== undefined && loaded !== forced) {
      throw new BenchError(`llama.cpp loaded the ggml CPU variant ${loaded}, not the forced ${forced}`, { field: "--cpu-variant", fix: `remove .cache/cpu-variants/${forced} and run again` });
    }
    return llama;
  });
  return llamaInstance;
}

/**
 * The embedded engine, both parts said: the node-llama-cpp package, and the llama.cpp release it
 * binds (its own version, as llama.cpp's CMakeLists.txt and `llama-server --version` say it) with
 * the commit of the source it bundles, e.g. `node-llama-cpp 3.21.1 / llama.cpp v0.4.0 (ggml-org/llama.cpp@80fb11ac73e6)`.
 */
export async function llamaCppEngineVersion(): Promise<string> {
  const { repo, release } = (await llamaRuntime()).llamaCppRelease;
  return `node-llama-cpp ${NODE_LLAMA_CPP_VERSION} / llama.cpp ${release}${BUNDLED_LLAMA_CPP_COMMIT === undefined ? "" : ` (${repo}@${BUNDLED_LLAMA_CPP_COMMIT.slice(0, 12)})`}`;
}

/** Whether a recorded engine is this one: the same string, or (recorded before commits were) the same string without the commit. */
export function sameLlamaCppEngine(recorded: string, running: string): boolean {
  return recorded === running || recorded === running.replace(/ \([^()]*@[0-9a-f]{12}\)$/, "");
}

/**
 * A model read into memory llama.cpp allocates (no mmap), on the CPU: its weights are then an
 * allocation, as a device's are, and a weight llama.cpp repacks for its CPU kernels is held once.
 * Mapped, the file's pages stay counted beside the repacked copy (tiny-random:Q4_K: 0.81 MiB mapped
 * plus 0.70 MiB repacked, against 0.10 plus 0.70 read in), which no budget of the weights describes.
 */
export function loadModelInMemory(llama: Llama, modelPath: string): Promise<LlamaModel> {
  return llama.loadModel({ modelPath, gpuLayers: 0, useMmap: false });
}

/** A context made with the settings that size its buffers and set its numerics. */
export function createLlamaCppContext(model: LlamaModel, settings: Pick<LlamaCppSettings, "contextSize" | "batchSize" | "sequences" | "threads" | "flashAttention" | "kvCacheType">): Promise<LlamaContext> {
  // node-llama-cpp's contextSize is per sequence: it allocates contextSize × sequences cells.
  return model.createContext({
    contextSize: settings.contextSize,
    batchSize: settings.batchSize,
    sequences: settings.sequences,
    threads: { ideal: settings.threads, min: settings.threads },
    flashAttention: settings.flashAttention,
    experimentalKvCacheKeyType: settings.kvCacheType,
    experimentalKvCacheValueType: settings.kvCacheType,
  });
}

/**
 * The embedded SUT: any llama-architecture GGUF evaluated by llama.cpp on CPU. The file is
 * validated by our own GGUF reader first, because some malformed files abort llama.cpp's process.
 */
/** What an in-process llama.cpp SUT records of itself: the file it loaded (hashed here), llama.cpp's version, its settings. */
export async function embeddedProvenance(modelPath: string, settings: SutProvenance["settings"]): Promise<SutProvenance> {
  const modelSha256 = await sha256File(modelPath);
  return {
    kind: "llamacpp",
    modelPath,
    modelSha256,
    loadedModel: { sha256: modelSha256, file: basename(modelPath), reportedBy: "the harness (it loaded this file itself)" },
    modelBytes: statSync(modelPath).size,
    engine: await llamaCppEngineVersion(),
    settings,
    cpu: cpuIdentity(),
  };
}

export class LlamaCppSut implements SystemUnderTest {
  readonly label: string;
  private closed = false;

  private constructor(
    readonly provenance: SutProvenance,
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly settings: LlamaCppSettings,
    private readonly native: NativeContext,
    label: string,
    private readonly allocated: AllocationReport,
  ) {
    this.label = label;
    // Sequences are taken once and reused (history cleared per request): a disposed sequence's
    // KV cells are erased asynchronously, and a sequence taken right after could be poisoned.
    this.sequences = Array.from({ length: settings.sequences }, () => context.getSequence());
  }

  private readonly sequences: LlamaContextSequence[];
  /** The evaluation in flight, settled or not: the next one starts after it, so two never share a sequence. */
  private inFlight: Promise<unknown> = Promise.resolve();
  /** Evaluations are numbered as they are asked for; those numbered below `abandonedBefore` stop at their next step. */
  private asked = 0;
  private abandonedBefore = 0;

  /**
   * Runs one evaluation after the one before it has settled. `live` throws once the evaluation
   * was abandoned (a per-case timeout): checked before every decode step, so an abandoned greedy
   * stops within one token and the next evaluation finds its sequence to itself. Without this, an
   * abandoned greedy kept decoding on sequence 0 beside the next case: the next answer was wrong,
   * then llama.cpp refused the interleaved positions ("Eval has failed") and the process died.
   */
  private exclusive<T>(method: string, evaluate: (live: () => void) => Promise<T>): Promise<T> {
    const number = this.asked++;
    const live = () => {
      if (number < this.abandonedBefore) throw new Error(`${this.label}: ${method} abandoned (the per-case timeout gave up on it)`);
    };
    const run = this.inFlight.then(() => {
      live();
      return evaluate(live);
    });
    this.inFlight = run.catch(() => undefined);
    return run;
  }

  abandon(): void {
    this.abandonedBefore = this.asked;
  }

  static async open(modelPath: string, settings: LlamaCppSettings, label?: string): Promise<LlamaCppSut> {
    validateLlamaMetadata(readGguf(modelPath), modelPath);
    // Loaded while llama.cpp's buffer lines are read: its own account of what this arm allocated, with the arm's settings.
    const llama = await llamaRuntime();
    const { value: { model, context }, lines } = await captureBufferLines(llama, async () => {
      let model: LlamaModel;
      try {
        model = await loadModelInMemory(llama, modelPath);
      } catch (error) {
        throw new BenchError(`llama.cpp could not load the model: ${(error as Error).message}`, { file: modelPath, fix: "check that the file is a complete llama GGUF" });
      }
      const context = await createLlamaCppContext(model, settings);
      return { model, context };
    });
    const native = reachNativeContext(context, settings);
    const provenance = await embeddedProvenance(modelPath, { ...settings });
    return new LlamaCppSut(provenance, model, context, settings, native, label ?? `llamacpp ${modelPath.split("/").pop()}`, llamaCppAllocationReport(lines, settings));
  }

  /** llama.cpp allocates its buffers once, at load: what it logged then is what it holds, steady and peak. */
  async allocations(): Promise<AllocationReport> {
    return this.allocated;
  }

  async tokenize(texts: readonly string[]): Promise<TokenId[][]> {
    // The file's add_bos_token decides, as in llama.cpp's own tokenize: a vocabulary can name a BOS it never adds (Qwen3's).
    const bos = this.model.tokens.shouldPrependBosToken ? this.model.tokens.bos : null;
    return texts.map((text) => {
      const ids = this.model.tokenize(text) as number[];
      return bos === null ? ids : [bos, ...ids];
    });
  }

  async detokenize(sequences: readonly (readonly TokenId[])[]): Promise<string[]> {
    return sequences.map((ids) => this.model.detokenize(ids as Token[]));
  }

  async inspectTokens(ids: readonly TokenId[]): Promise<TokenKind[]> {
    return ids.map((id) => {
      const attributes = this.model.getTokenAttributes(id as Token);
      if (attributes.byte) return "byte";
      if (attributes.unknown) return "unknown";
      if (attributes.control) return "control";
      return "text";
    });
  }

  /** Applies the overflow policy: the prompt as it will really be evaluated. */
  private fitPrompt(request: GreedyRequest): GreedyRequest {
    const needed = request.promptIds.length + request.maxTokens;
    if (needed <= this.settings.contextSize || this.settings.promptOverflow === "error") {
      assertFits(this.settings, needed);
      return request;
    }
    const keep = this.settings.contextSize - request.maxTokens - 1;
    return { ...request, promptIds: [request.promptIds[0], ...request.promptIds.slice(request.promptIds.length - keep)] };
  }

  greedy(requests: readonly GreedyRequest[]): Promise<TokenId[][]> {
    return this.exclusive("greedy", async (live) => {
      const results: TokenId[][] = [];
      for (const request of requests) results.push(await greedyOnSequence(this.sequences[0], this.fitPrompt(request), live));
      return results;
    });
  }

  batchedGreedy(requests: readonly GreedyRequest[]): Promise<TokenId[][]> {
    return this.exclusive("batchedGreedy", (live) => this.batchedGreedyNow(requests, live));
  }

  private async batchedGreedyNow(requests: readonly GreedyRequest[], live: () => void): Promise<TokenId[][]> {
    if (requests.length > this.settings.sequences) {
      throw new BenchError(`${requests.length} prompts in one batch need ${requests.length} sequences, the context has ${this.settings.sequences}`, {
        field: "sequences", fix: "open the SUT with sequences >= the batch size",
      });
    }
    requests = requests.map((request) => this.fitPrompt(request));
    // Prompts are prefilled one at a time, then every sequence advances one token per step in one
    // batch, as a continuous-batching decode loop does. In node-llama-cpp 3.21.1 on CPU, several
    // sequences prefilling in one batch, or sequences at different phases sharing a batch, gave
    // wrong tokens (docs/findings.md); this check would measure that engine bug on every run.
    const sequences = this.sequences.slice(0, requests.length);
    for (const sequence of sequences) await sequence.clearHistory();
    const generated: TokenId[][] = requests.map(() => []);
    let next: TokenId[] = [];
    for (const [i, request] of requests.entries()) {
      const prompt = request.promptIds as Token[];
      live();
      next.push(await evaluateNext(sequences[i], [...prompt.slice(0, -1), [prompt[prompt.length - 1], GREEDY_NEXT]]));
    }
    for (;;) {
      live();
      const active = requests.map((_, i) => i).filter((i) => generated[i].length < requests[i].maxTokens);
      active.forEach((i) => generated[i].push(next[i]));
      const continuing = active.filter((i) => generated[i].length < requests[i].maxTokens);
      if (continuing.length === 0) return generated;
      const stepped = await Promise.all(continuing.map((i) => evaluateNext(sequences[i], [[next[i] as Token, GREEDY_NEXT]])));
      next = [...next];
      continuing.forEach((i, j) => { next[i] = stepped[j]; });
    }
  }

  teacherForcedTopK(requests: readonly TeacherForcedRequest[]): Promise<TopK[][]> {
    return this.exclusive("teacherForcedTopK", (live) => this.teacherForcedTopKNow(requests, live));
  }

  private async teacherForcedTopKNow(requests: readonly TeacherForcedRequest[], live: () => void): Promise<TopK[][]> {
    const sequence = this.sequences[0];
    const results: TopK[][] = [];
    for (const request of requests) {
      live();
      await sequence.clearHistory();
      const ids = [...request.promptIds, ...request.continuationIds];
      assertFits(this.settings, ids.length);
      // The distribution before continuation token j comes from the position of the token just before it.
      const firstScored = request.promptIds.length - 1;
      results.push(this.native.reached
        ? nativeTopK(this.native, sequence, ids.slice(0, -1), firstScored, request.k)
        : await topKThroughNode(sequence, ids, firstScored, request.k));
    }
    return results;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.context.dispose();
    releaseNativeContext(this.native);
    await this.model.dispose();
  }
}

/** Refuses work that would overflow a sequence: llama.cpp would shift the context and compute garbage silently. */
function assertFits(settings: LlamaCppSettings, tokens: number): void {
  if (tokens > settings.contextSize) {
    throw new BenchError(`a request needs ${tokens} tokens, the context holds ${settings.contextSize} per sequence`, { field: "context_size", fix: "raise the arm's context_size" });
  }
}

/**
 * Teacher forcing through the addon: the top-k is taken in native code from llama.cpp's logits, so
 * no position's whole vocabulary becomes a JavaScript Map (at a 152k vocabulary that cost far more
 * than the forward pass). The sequence is empty for node-llama-cpp before and after.
 */
function nativeTopK(native: Extract<NativeContext, { reached: true }>, sequence: LlamaContextSequence, input: readonly TokenId[], firstScored: number, k: number): TopK[] {
  return teacherForceInEmptySequence(native, sequenceIdOf(sequence), input, firstScored, k).rows;
}

/** Teacher forcing where the addon is not there: node-llama-cpp's full distribution per position, reduced here. */
async function topKThroughNode(sequence: LlamaContextSequence, ids: readonly TokenId[], firstScored: number, k: number): Promise<TopK[]> {
  const input = ids.slice(0, -1).map((id, position) =>
    position >= firstScored ? ([id as Token, { generateNext: { probabilities: true } }] as const) : (id as Token));
  const output = await sequence.controlledEvaluate(input as Parameters<LlamaContextSequence["controlledEvaluate"]>[0]);
  const rows: TopK[] = [];
  for (let position = firstScored; position < ids.length - 1; position++) {
    const probabilities = output[position]?.next.probabilities;
    if (probabilities === undefined) throw new Error(`llama.cpp returned no distribution at position ${position}`);
    rows.push(topKFromProbabilities(probabilities, k));
  }
  return rows;
}

/**
 * The next token as llama.cpp's greedy sampler picks it (the first largest logit), sampled in
 * native code: asking for the distribution instead would build a Map of the whole vocabulary per
 * token in JavaScript, which at a 152k vocabulary costs more than the forward pass.
 */
const GREEDY_NEXT = { generateNext: { token: true } } as const;

/** Greedy on one sequence; `live` throws where the call was abandoned, checked before every decode step. */
async function greedyOnSequence(sequence: LlamaContextSequence, request: GreedyRequest, live: () => void): Promise<TokenId[]> {
  await sequence.clearHistory();
  const generated: TokenId[] = [];
  const prompt = request.promptIds as Token[];
  live();
  let next = await evaluateNext(sequence, [...prompt.slice(0, -1), [prompt[prompt.length - 1], GREEDY_NEXT]]);
  while (generated.length < request.maxTokens) {
    generated.push(next);
    if (generated.length === request.maxTokens) break;
    live();
    next = await evaluateNext(sequence, [[next as Token, GREEDY_NEXT]]);
  }
  return generated;
}

async function evaluateNext(sequence: LlamaContextSequence, input: Parameters<LlamaContextSequence["controlledEvaluate"]>[0]): Promise<TokenId> {
  const output = await sequence.controlledEvaluate(input);
  const token = output[output.length - 1]?.next.token;
  if (token === undefined || token === null) throw new Error("llama.cpp returned no next token");
  return token;
}
