/**
 * The instruction-set extensions each x86 ggml CPU library of the bundled llama.cpp is built for
 * (its ggml/src/CMakeLists.txt, GGML_CPU_ALL_VARIANTS). x64 is the baseline (SSE2 only); ggml scores
 * every shipped library against the CPU at load and keeps the best one the CPU can run.
 */
export const VARIANT_EXTENSIONS: Readonly<Record<string, readonly string[]>> = {
  x64: [],
  sse42: ["SSE42"],
  sandybridge: ["SSE42", "AVX"],
  ivybridge: ["SSE42", "AVX", "F16C"],
  piledriver: ["SSE42", "AVX", "F16C", "FMA"],
  haswell: ["SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2"],
  alderlake: ["SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX_VNNI"],
  skylakex: ["SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512"],
  cannonlake: ["SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VBMI"],
  cascadelake: ["SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VNNI"],
  icelake: ["SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VBMI", "AVX512_VNNI"],
  cooperlake: ["SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VNNI", "AVX512_BF16"],
  zen4: ["SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16"],
  sapphirerapids: ["SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_TILE", "AMX_INT8"],
};

/**
 * The variant a second CI pass forces so that a bound set on one instruction set is tried on
 * another: haswell (AVX2 with FMA) where ggml picks an AVX-512 library; sandybridge (AVX without
 * FMA: every dot product rounds at its multiplies and its adds) where it picks an AVX2 one; x64 (no
 * SIMD extension) below that, and sse42 where x64 is ggml's own pick. Not x64 on an AVX2 machine:
 * it took 4.5x haswell's time on niah-quick's 4,000-token needle (218 s against 52 s on a 2-core
 * AMD EPYC), close to the needle's per-case timeout on a busy CI machine.
 */
export function contrastingVariant(picked: string): string {
  const extensions = VARIANT_EXTENSIONS[picked] ?? [];
  if (extensions.includes("AVX512")) return "haswell";
  if (extensions.includes("AVX2")) return "sandybridge";
  return picked === "x64" ? "sse42" : "x64";
}
