import { basename } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { sha256File } from "../harness/io/sha256.js";
import { createLlamaCppContext, llamaRuntime, loadModelInMemory } from "../harness/sut/llamacpp.js";
import { captureBufferLines, llamaCppAllocationReport } from "../harness/sut/llamacpp-buffer-capture.js";
import { reachNativeContext, releaseNativeContext } from "../harness/sut/llamacpp-native-context.js";
import { TokenPieces } from "../harness/sut/token-pieces.js";
import type { Token } from "node-llama-cpp";
import { readGguf } from "../harness/gguf/read.js";
import { tokenizerFingerprint } from "../harness/gguf/tokenizer-fingerprint.js";
import { BenchError } from "../harness/errors.js";
import { ggufChatTemplate } from "../harness/gguf/chat-template.js";
import { validateLlamaMetadata } from "../harness/gguf/llama-metadata.js";
import { BatchEngine } from "./engine.js";
import { ChatPrompter } from "./chat-prompt.js";
import type { ServerFault } from "./faults.js";
import { CompletionServer } from "./http-server.js";
import type { ServerNumerics, ServerOptions } from "./server-options.js";
import { ServerMetrics } from "./metrics.js";
import { stateKind, type PromptCacheSettings } from "./prompt-cache.js";
import { DraftSpeculator, type SpeculationSettings } from "./speculation.js";
import { StepTracer } from "./step-trace.js";

export interface StartOptions extends Omit<ServerOptions, "numerics" | "cache" | "speculation">, PromptCacheSettings {
  readonly modelPath: string;
  readonly slots: number;
  readonly maxQueue: number;
  /** Tokens per slot. */
  readonly contextSize: number;
  readonly threads: number;
  readonly flashAttention: boolean;
  /** llama.cpp's default is F16; F32 is the oracle recipe's, and what a parity arm against F32 goldens may ask for. */
  readonly kvCacheType: "F32" | "F16";
  readonly batchSize: number;
  /**
   * FAKE boot delay, for tests of clients' boot handling only: real devices take minutes to boot,
   * the tiny CPU fixtures take a fraction of a second, so /health's 503 could not be observed.
   */
  readonly simulateBootSeconds: number;
  /** A planted FAULT, for tests only (faults.ts). */
  readonly fault?: ServerFault;
  /** Speculative decoding of greedy requests with a draft model (speculation.ts); absent: none. */
  readonly speculation?: { readonly draftModelPath: string; readonly draftMax: number };
  /** `--trace-steps`: the file the engine's step trace goes to (step-trace.ts), and where its one warning goes; absent: no trace. */
  readonly traceSteps?: { readonly path: string; readonly onWarning: (message: string) => void };
}

export interface RunningServer {
  readonly port: number;
  /** Resolves when the model is loaded and /health answers 200. */
  readonly ready: Promise<void>;
  readonly shutdown: () => Promise<void>;
}

/** Listens at once (so /health can say 503 and why), then loads the model and starts the engine. */
export async function startServer(options: StartOptions): Promise<RunningServer> {
  const targetFile = readGguf(options.modelPath);
  const vocabSize = validateLlamaMetadata(targetFile, options.modelPath).vocabSize;
  if (options.speculation !== undefined) {
    const { draftModelPath } = options.speculation;
    const draftFile = readGguf(draftModelPath);
    validateLlamaMetadata(draftFile, draftModelPath);
    if (tokenizerFingerprint(draftFile) !== tokenizerFingerprint(targetFile)) {
      throw new BenchError(`the draft model's tokenizer is not the target's (${options.modelPath}): its drafts would be other tokens`, { file: draftModelPath, field: "--draft-model", fix: "draft with a model of the same vocabulary (e.g. a quantized or smaller sibling of the target)" });
    }
  }
  const chatTemplate = ggufChatTemplate(targetFile);
  const metrics = new ServerMetrics();
  const numerics: ServerNumerics = {
    flash_attention: options.flashAttention, kv_cache_type: options.kvCacheType, threads: options.threads,
    batch_size: options.batchSize, context_size: options.contextSize, slots: options.slots,
  };
  const cache: PromptCacheSettings = { promptCache: options.promptCache, prefillChunk: Math.min(options.prefillChunk, options.batchSize), hostCacheMiB: options.hostCacheMiB };
  const speculation = options.speculation === undefined ? undefined : { draft_model: basename(options.speculation.draftModelPath), draft_max: options.speculation.draftMax };
  const trace = options.traceSteps === undefined ? undefined : new StepTracer(options.traceSteps.path, { ...numerics, ...cache, ...speculation }, options.traceSteps.onWarning);
  const server = new CompletionServer({ ...options, numerics, cache, speculation }, metrics, trace);
  const port = await server.listen();
  let dispose: (() => Promise<void>) | undefined;
  const ready = (async () => {
    if (options.simulateBootSeconds > 0) {
      server.setStage("simulated device boot");
      await sleep(options.simulateBootSeconds * 1000);
    }
    server.setStage("hashing the model file");
    const artifact = { file: basename(options.modelPath), sha256: await sha256File(options.modelPath) };
    server.setStage("loading model");
    const llama = await llamaRuntime();
    // FAULT kv-extra-slots: the context holds twice the sequences the server has slots for, as a server that sizes its KV for more slots than asked.
    const sequences = options.fault === "kv-extra-slots" ? 2 * options.slots : options.slots;
    const shape = { contextSize: options.contextSize, sequences, batchSize: options.batchSize, threads: options.threads };
    // Loaded while llama.cpp's buffer lines are read: GET /allocations reports what it allocated (the draft model's too).
    const { value: { model, context, native, draft }, lines } = await captureBufferLines(llama, async () => {
      const model = await loadModelInMemory(llama, options.modelPath);
      server.setStage("creating context");
      const context = await createLlamaCppContext(model, { ...options, sequences });
      const native = reachNativeContext(context, shape);
      if (options.speculation === undefined || speculation === undefined) return { model, context, native, draft: undefined };
      server.setStage("loading the draft model");
      return { model, context, native, draft: await openDraft(llama, options.speculation.draftModelPath, native, shape, options, speculation) };
    });
    const allocations = llamaCppAllocationReport(lines, { ...options, sequences: options.slots });
    if (options.fault === "text-by-detokenize") TokenPieces.plantByDetokenize(model);
    const pieces = TokenPieces.of(model).source;
    if (!pieces.exact) process.stderr.write(`warning: text is made by llama_detokenize one token at a time (${pieces.reason}): its clean-up of spaces can change pieces such as " !==", and a character split over tokens comes out as U+FFFD\n  hint: npm run build:native\n`);
    const engine = new BatchEngine(model, context, native, options.slots, options.contextSize, options.maxQueue, metrics.observer, cache, options.fault, draft?.speculator, trace);
    // The special tokens' texts as llama-server gives them to a template (control tokens rendered).
    const text = (id: Token | null) => (id === null ? "" : model.detokenize([id], true));
    const chat = new ChatPrompter(chatTemplate,
      { bosToken: text(model.tokens.bos), eosToken: text(model.tokens.eos), addsBos: model.tokens.bos !== null && model.tokens.shouldPrependBosToken }, options.fault === "chat-template-own");
    server.attach(engine, model, vocabSize, artifact, chat, allocations);
    dispose = async () => {
      await context.dispose();
      releaseNativeContext(native);
      await model.dispose();
      await draft?.dispose();
    };
  })();
  return {
    port,
    ready,
    shutdown: async () => {
      await ready.catch(() => undefined);
      await server.shutdown();
      await trace?.close();
      await dispose?.();
    },
  };
}

/**
 * The draft model in a context of its own, as large as the target's (a sequence per slot), and the
 * speculator over both. Speculation runs through our llama-context addon (where it cannot be
 * reached, speculation is refused at boot, never left to run plain behind a flag that says
 * otherwise), on any target: attention KV is cut back, recurrent state and a sliding window
 * restored from a checkpoint (speculation.ts).
 */
async function openDraft(
  llama: Awaited<ReturnType<typeof llamaRuntime>>, draftModelPath: string, target: ReturnType<typeof reachNativeContext>,
  shape: { contextSize: number; sequences: number; batchSize: number; threads: number }, options: StartOptions, settings: SpeculationSettings,
): Promise<{ speculator: DraftSpeculator; dispose: () => Promise<void> }> {
  const refuse = (why: string, fix: string) => new BenchError(`cannot speculate: ${why}`, { file: draftModelPath, field: "--draft-model", fix });
  if (!target.reached) throw refuse(`the target's context is out of reach (${target.reason})`, "npm run build:native, or serve without --draft-model");
  const model = await loadModelInMemory(llama, draftModelPath);
  const context = await createLlamaCppContext(model, { ...options, ...shape });
  const native = reachNativeContext(context, shape);
  const dispose = async () => {
    await context.dispose();
    releaseNativeContext(native);
    await model.dispose();
  };
  if (!native.reached) {
    await dispose();
    throw refuse(`the draft's context is out of reach (${native.reason})`, "npm run build:native");
  }
  // The speculator holds them for the server's life: node-llama-cpp clears a sequence whose object is collected.
  const sequences = Array.from({ length: shape.sequences }, () => context.getSequence());
  return { speculator: new DraftSpeculator(target, stateKind(target.memoryKind), native, stateKind(native.memoryKind), sequences, settings, options.fault), dispose };
}
