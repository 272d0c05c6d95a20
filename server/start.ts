import { basename } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { sha256File } from "../harness/io/sha256.js";
import { llamaRuntime } from "../harness/sut/llamacpp.js";
import { reachNativeContext, releaseNativeContext } from "../harness/sut/llamacpp-native-context.js";
import type { Token } from "node-llama-cpp";
import { readGguf } from "../harness/gguf/read.js";
import { ggufChatTemplate } from "../harness/gguf/chat-template.js";
import { validateLlamaMetadata } from "../harness/gguf/llama-metadata.js";
import { BatchEngine } from "./engine.js";
import { ChatPrompter } from "./chat-prompt.js";
import type { ServerFault } from "./faults.js";
import { CompletionServer, type ServerNumerics, type ServerOptions } from "./http-server.js";
import { ServerMetrics } from "./metrics.js";
import type { PromptCacheSettings } from "./prompt-cache.js";

export interface StartOptions extends Omit<ServerOptions, "numerics" | "cache">, PromptCacheSettings {
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
}

export interface RunningServer {
  readonly port: number;
  /** Resolves when the model is loaded and /health answers 200. */
  readonly ready: Promise<void>;
  readonly shutdown: () => Promise<void>;
}

/** Listens at once (so /health can say 503 and why), then loads the model and starts the engine. */
export async function startServer(options: StartOptions): Promise<RunningServer> {
  const gguf = readGguf(options.modelPath);
  const vocabSize = validateLlamaMetadata(gguf, options.modelPath).vocabSize;
  const chatTemplate = ggufChatTemplate(gguf);
  const metrics = new ServerMetrics();
  const numerics: ServerNumerics = {
    flash_attention: options.flashAttention, kv_cache_type: options.kvCacheType, threads: options.threads,
    batch_size: options.batchSize, context_size: options.contextSize, slots: options.slots,
  };
  const cache: PromptCacheSettings = { promptCache: options.promptCache, prefillChunk: Math.min(options.prefillChunk, options.batchSize) };
  const server = new CompletionServer({ ...options, numerics, cache }, metrics);
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
    const model = await llama.loadModel({ modelPath: options.modelPath, gpuLayers: 0 });
    server.setStage("creating context");
    // node-llama-cpp's contextSize is per sequence: it allocates contextSize × slots cells.
    const context = await model.createContext({
      contextSize: options.contextSize,
      sequences: options.slots,
      batchSize: options.batchSize,
      threads: { ideal: options.threads, min: options.threads },
      flashAttention: options.flashAttention,
      experimentalKvCacheKeyType: options.kvCacheType,
      experimentalKvCacheValueType: options.kvCacheType,
    });
    const native = reachNativeContext(context, { contextSize: options.contextSize, sequences: options.slots, batchSize: options.batchSize, threads: options.threads });
    const engine = new BatchEngine(model, context, native, options.slots, options.contextSize, options.maxQueue, metrics.observer, cache, options.fault);
    // The special tokens' texts as llama-server gives them to a template (control tokens rendered).
    const text = (id: Token | null) => (id === null ? "" : model.detokenize([id], true));
    const chat = new ChatPrompter(chatTemplate,
      { bosToken: text(model.tokens.bos), eosToken: text(model.tokens.eos), addsBos: model.tokens.bos !== null && model.tokens.shouldPrependBosToken }, options.fault === "chat-template-own");
    server.attach(engine, model, vocabSize, artifact, chat);
    dispose = async () => {
      await context.dispose();
      releaseNativeContext(native);
      await model.dispose();
    };
  })();
  return {
    port,
    ready,
    shutdown: async () => {
      await ready.catch(() => undefined);
      await server.shutdown();
      await dispose?.();
    },
  };
}
