import type { LlamaContext } from "node-llama-cpp";

/** The part of node-llama-cpp's native context this workaround reaches (private in its typings). */
interface NativeSampling {
  sampleToken: (...args: unknown[]) => Promise<unknown>;
}

/**
 * Works around a race in node-llama-cpp 3.21.1 (README, Findings): it samples each sequence of a
 * batch in its own AsyncWorker on libuv's thread pool, and llama.cpp's first logits read after a
 * batch whose outputs were reordered (several sequences, no unified KV cache) applies the
 * reordering in place — two threads doing that at once hand a sequence another's logits. Chaining
 * the context's samplings one after another, as llama-server samples on its one thread, removes
 * the overlap; a sampling is microseconds against a decode's milliseconds.
 */
export function serialiseSampling(context: LlamaContext): void {
  const native = (context as unknown as { _ctx: NativeSampling })._ctx;
  const sample = native.sampleToken.bind(native);
  let last: Promise<unknown> = Promise.resolve();
  // The addon's methods are read-only prototype properties: shadow it on this instance.
  Object.defineProperty(native, "sampleToken", {
    value: (...args: unknown[]) => {
      const result = last.then(() => sample(...args));
      last = result.catch(() => undefined);
      return result;
    },
  });
}
