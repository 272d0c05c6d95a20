/**
 * The baseline for the harness's overhead benchmarks: the same evaluations written directly
 * against node-llama-cpp, with nothing of the harness in between (no validation, hashing,
 * scoring or result files). Same settings as the oracle recipe, and the cheapest way to the same
 * answers: greedy tokens sampled natively, and teacher-forced top-k reduced natively by the addon
 * where it is built (node-llama-cpp's own full-vocabulary Map where it is not), as the harness does.
 */
import { availableParallelism } from "node:os";
import { getLlama, LlamaLogLevel, type LlamaContextSequence, type Token } from "node-llama-cpp";
import { reachNativeContext, releaseNativeContext, sequenceIdOf } from "../harness/sut/llamacpp-native-context.js";

export interface RawSession {
  tokenize(text: string): Token[];
  greedy(prompt: Token[], maxTokens: number): Promise<Token[]>;
  /** Per continuation position, its top-k as [id, log-prob]. */
  teacherForced(prompt: Token[], continuation: Token[], k: number): Promise<Array<Array<[Token, number]>>>;
  close(): Promise<void>;
}

let runtime: ReturnType<typeof getLlama> | undefined;

export async function openRaw(modelPath: string, options: { flashAttention?: boolean; contextSize?: number; threads?: number; kvCacheType?: "F32" | "F16" } = {}): Promise<RawSession> {
  // One runtime per process, as the harness keeps it: its start-up is not part of either side's work.
  runtime ??= getLlama({ gpu: false, build: "never", maxThreads: availableParallelism(), logLevel: LlamaLogLevel.error });
  const llama = await runtime;
  const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
  const settings = { contextSize: options.contextSize ?? 1024, batchSize: 512, sequences: 1, threads: options.threads ?? 1 };
  const context = await model.createContext({
    ...settings, threads: { ideal: settings.threads, min: settings.threads },
    flashAttention: options.flashAttention ?? false, experimentalKvCacheKeyType: options.kvCacheType ?? "F32", experimentalKvCacheValueType: options.kvCacheType ?? "F32",
  });
  // The same threading as the harness's embedded SUT, so the two sides differ only in the harness.
  const native = reachNativeContext(context, settings);
  const sequence: LlamaContextSequence = context.getSequence();
  const sequenceId = sequenceIdOf(sequence);
  const next = { generateNext: { token: true } } as const;
  const distribution = { generateNext: { probabilities: true } } as const;
  return {
    // BOS where the file's add_bos_token says so, as the harness's embedded SUT tokenizes (Qwen3's vocabulary names one it never adds).
    tokenize: (text) => (model.tokens.shouldPrependBosToken && model.tokens.bos !== null ? [model.tokens.bos, ...model.tokenize(text)] : model.tokenize(text)),
    async greedy(prompt, maxTokens) {
      await sequence.clearHistory();
      const out: Token[] = [];
      let result = await sequence.controlledEvaluate([...prompt.slice(0, -1), [prompt[prompt.length - 1], next]]);
      for (;;) {
        const token = result[result.length - 1]!.next.token!;
        out.push(token);
        if (out.length === maxTokens) return out;
        result = await sequence.controlledEvaluate([[token, next]]);
      }
    },
    async teacherForced(prompt, continuation, k) {
      await sequence.clearHistory();
      const ids = [...prompt, ...continuation];
      if (native.reached) {
        native.clearSequence(sequenceId);
        const rows = native.teacherForcedTopK(sequenceId, Int32Array.from(ids.slice(0, -1)), prompt.length - 1, k);
        native.clearSequence(sequenceId);
        return continuation.map((_, j) => Array.from({ length: k }, (_, r) => [rows.ids[j * k + r] as Token, rows.logprobs[j * k + r]] as [Token, number]));
      }
      const result = await sequence.controlledEvaluate(ids.slice(0, -1).map((id, i) => (i >= prompt.length - 1 ? [id, distribution] as [Token, typeof distribution] : id)));
      return continuation.map((_, j) => [...result[prompt.length - 1 + j]!.next.probabilities!.entries()].sort((a, b) => b[1] - a[1]).slice(0, k).map(([id, p]) => [id, Math.log(p)] as [Token, number]));
    },
    async close() {
      await context.dispose();
      releaseNativeContext(native);
      await model.dispose();
    },
  };
}
