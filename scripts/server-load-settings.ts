/**
 * The server and load settings `bench:server` compares our server and llama-server at, and that
 * ttft-anatomy takes our server apart at: one place, so the two scripts measure the same thing.
 * BENCH_THREADS and BENCH_PROMPT_CACHE=off override, for both.
 */
export const SLOTS = 4;
export const THREADS = Number(process.env.BENCH_THREADS ?? 2);
/** Tokens per slot (llama-server's context is this × the slots, shared). */
export const CONTEXT_PER_SLOT = 256;
export const BATCH = 512;
export const INPUT_TOKENS = 32;
export const OUTPUT_TOKENS = 64;
export const PROMPT_CACHE = process.env.BENCH_PROMPT_CACHE !== "off";
