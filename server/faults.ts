import { BenchError } from "../harness/errors.js";

/**
 * FAULT switches of our server, for tests only: each plants one bug a bring-up server really has,
 * so that a test can show the harness catches it. Set through the environment (BENCH_SERVER_FAULT),
 * so a harness-started server inherits it and no user-facing flag exists.
 *
 * `skip-slot-clear`: a slot's sequence is not cleared when the slot takes its next request, so
 * the recurrent and conv state (and the KV cells) of the previous request leak into the next one:
 * "slot poisoning" of hybrid and recurrent models.
 *
 * The prompt cache's (prompt-cache.ts; they act on plain greedy requests, the cached path):
 * `restore-one-early`: every checkpoint is taken one token before the position it is filed
 * under, so a prefix hit that restores one resumes one token late on a state one token short
 * (recurrent and sliding-window families; attention-only models have no checkpoints).
 * `restore-other-slot`: a prefix hit resumes from another slot's state: its checkpoint of the same
 * length, or (attention-only models) its first cells copied in.
 * `swa-past-window`: a sliding-window cache cut back to the shared prefix is reused without a
 * checkpoint whenever its first position is early enough (llama_memory_seq_pos_min), although
 * cells inside the window may have been overwritten (gemma4).
 * `chunk-drops-conv`: at every prefill chunk edge the sequence is cleared, so the next chunk starts
 * as a new sequence: an emulation of a chunked prefill that drops the conv state, since llama.cpp
 * offers no way to zero the conv state alone (it drops the SSM state and earlier cells too).
 * `report-hits-no-reuse`: usage reports the prefix the cache held, but the prompt is prefilled in full.
 * `reuse-not-reported`: the prefix is reused, and usage reports 0 cached tokens.
 * `host-restore-other`: a hit in the host cache (host-prompt-cache.ts) restores another entry's
 * state under the chosen entry's tokens, as a host cache whose keys and states fell out of step.
 *
 * Speculation's (speculation.ts; they act with --draft-model on plain greedy requests):
 * `spec-accept-near-tie`: a draft is kept where its target log-prob trails the argmax's by no
 * more than the near-tie band, though it is not the argmax.
 * `spec-accept-past-mismatch`: the first rejected draft of every step is kept as well.
 * `spec-no-rollback`: after a rejection the recurrent state is not restored from its checkpoint:
 * it keeps the rejected drafts, set back to the kept tokens' position (hybrid and recurrent targets).
 *
 * The echo path's (engine.ts, scorePromptNatively): `echo-one-late`: each echoed prompt token is
 * given the log-prob and top-k of the position after its own, an off-by-one in teacher forcing.
 *
 * The greedy log-prob path's (engine.ts, stepBatch): `logprobs-other-row`: each sequence's
 * greedy log-prob and top-k are read from the next ranked sequence's output row of the step (its
 * own token still from its own row), as a server that mis-indexes its batch's outputs reports them;
 * a step with one ranked sequence is unchanged.
 *
 * The chat path's (chat-prompt.ts): `chat-template-own`: chat is rendered with the server's plain
 * built-in template although the model file carries its own, while /props still names the file's.
 *
 * The text's (token-text.ts, routes/tokens.ts): `text-by-detokenize`: every piece of text (streamed,
 * returned, echoed, /detokenize) is made by llama_detokenize one id at a time, whose clean-up of
 * spaces changes pieces such as Llama 3's " !==" into "!==".
 *
 * The sampler's (sampling-faults.ts; they act on sampled requests, temperature > 0):
 * `sample-temperature-twice`: the logits are divided by the temperature twice.
 * `sample-top-p-one-short`: the nucleus leaves out the token that carries its mass to top_p.
 * `sample-top-p-one-extra`: the nucleus keeps one token past the one that reaches top_p.
 * `sample-top-k-unstable-ties`: top_k ranks logits rounded to bfloat16 (as a device that keeps
 * them in bf16 does) and orders the ties it makes at random, so which of them k keeps changes
 * from draw to draw.
 * `sample-min-p-wrong-max`: min_p keeps probabilities of at least min_p, not min_p times the most
 * likely token's.
 * `sample-llama-order`: top_k, top_p and min_p cut the raw distribution and the temperature acts
 * last (llama.cpp's chain), while the server declares the OpenAI order.
 * `sample-unseeded`: a request's seed is ignored; every request draws from a fresh random seed.
 * `sample-small-temperature-underflow`: the weights are p^(1/T) of the probabilities themselves,
 * which underflow to 0 for every token at a small temperature, and a draw over weights of 0 takes
 * the first candidate, id 0 (what the server once did at temperature 0.0001).
 * `sample-params-ignored` (requests.ts): logit_bias, the penalties and n are accepted and ignored,
 * and so is min_p, as the server once answered them: 200 with the tokens of a request without them.
 *
 * The memory's (start.ts): `kv-extra-slots`: the context is made with twice the sequences the
 * server has slots for, so its KV cache (and recurrent state) is sized for slots nobody asked for,
 * while /v1/models and GET /allocations still say the slots asked.
 *
 * The process's (harness/cli/commands/serve.ts): `crash-at-shutdown`: once drained after its last
 * answer, the server dies of SIGSEGV, as one whose memory is corrupt crashes in its teardown.
 */
export const SERVER_FAULTS = ["skip-slot-clear", "restore-one-early", "restore-other-slot", "swa-past-window", "chunk-drops-conv", "report-hits-no-reuse", "reuse-not-reported", "host-restore-other",
  "spec-accept-near-tie", "spec-accept-past-mismatch", "spec-no-rollback", "chat-template-own", "echo-one-late", "logprobs-other-row", "crash-at-shutdown", "kv-extra-slots",
  "text-by-detokenize",
  "sample-temperature-twice", "sample-top-p-one-short", "sample-top-p-one-extra", "sample-top-k-unstable-ties", "sample-min-p-wrong-max", "sample-llama-order", "sample-unseeded", "sample-params-ignored",
  "sample-small-temperature-underflow"] as const;
export type ServerFault = (typeof SERVER_FAULTS)[number];

export const SERVER_FAULT_ENV = "BENCH_SERVER_FAULT";

/** The planted fault the environment asks for, if any; an unknown name is an error, not ignored. */
export function serverFaultFromEnvironment(env: NodeJS.ProcessEnv = process.env): ServerFault | undefined {
  const value = env[SERVER_FAULT_ENV];
  if (value === undefined || value === "") return undefined;
  if (!(SERVER_FAULTS as readonly string[]).includes(value)) {
    throw new BenchError(`unknown server fault "${value}"`, { field: SERVER_FAULT_ENV, fix: `unset it, or use one of ${SERVER_FAULTS.join(", ")}` });
  }
  return value as ServerFault;
}

/** FAULT logprobs-other-row: entry i of a step reads the distribution of the next entry that has one (cyclically). */
export function readNextRankedRow<T>(read: (index: number) => T | undefined, topK: Int32Array): (index: number) => T | undefined {
  const ranked = Array.from(topK.keys()).filter((i) => topK[i] > 0);
  return (index) => (topK[index] === 0 ? undefined : read(ranked[(ranked.indexOf(index) + 1) % ranked.length]));
}
