import type { LlamaContext } from "node-llama-cpp";
import type { NativeContext } from "../harness/sut/llamacpp-native-context.js";

/** The part of node-llama-cpp's native context this workaround reaches (private in its typings). */
interface NativeSampling {
  sampleToken: (...args: unknown[]) => Promise<unknown>;
}

/**
 * Works around a race in node-llama-cpp 3.21.1 (docs/findings.md): it samples each sequence of a
 * batch in its own AsyncWorker on libuv's thread pool, and llama.cpp's first logits read after a
 * batch whose outputs were reordered (several sequences, no unified KV cache) applies the
 * reordering in place — two threads doing that at once hand a sequence another's logits.
 *
 * Where our addon reaches the llama.cpp context, every sampling first settles the outputs on the
 * JavaScript thread (the first does the reorder, the rest find nothing to do), and the samplings
 * then run at once, only reading. A sampling that asks for the token alone (no probabilities, no
 * confidence) is the engine's greedy probe (engine.ts, probeFor): its argmax is taken right there,
 * sparing the hop to a worker thread and back. One that asks for the confidence alone is the
 * engine's ROW probe: answered right there too, with a copy of the output's logits in the
 * confidence slot (node-llama-cpp passes that value through as it is), which the server samples
 * from; node-llama-cpp's own answer, its probabilities, is a Map of the vocabulary. Without the
 * addon samplings are chained one after another, as llama-server samples on its one thread:
 * correct, one thread hop per sequence slower.
 */
export function orderSampling(context: LlamaContext, native: NativeContext): void {
  const sampling = (context as unknown as { _ctx: NativeSampling })._ctx;
  const sample = sampling.sampleToken.bind(sampling);
  let ordered: (...args: unknown[]) => Promise<unknown>;
  if (native.reached) {
    ordered = (...args) => {
      native.settleOutputs();
      // node-llama-cpp's call: (batchLogitIndex, sampler, returnProbabilities, returnConfidence) -> [token, probabilities, confidence].
      if (args[2] === false && args[3] === false) return Promise.resolve([native.greedyToken(args[0] as number), undefined, undefined]);
      if (args[2] === false && args[3] === true) return Promise.resolve([-1, undefined, native.logitsRow(args[0] as number)]);
      return sample(...args);
    };
  } else {
    let last: Promise<unknown> = Promise.resolve();
    ordered = (...args) => {
      const result = last.then(() => sample(...args));
      last = result.catch(() => undefined);
      return result;
    };
  }
  // The addon's methods are read-only prototype properties: shadow it on this instance.
  Object.defineProperty(sampling, "sampleToken", { value: ordered });
}
