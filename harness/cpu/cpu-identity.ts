import { readFileSync } from "node:fs";
import { cpus } from "node:os";

/**
 * The instruction-set extensions that decide which ggml CPU library a machine can run and which
 * kernels it takes (each library is built for one set of them), in /proc/cpuinfo's spelling.
 */
const ISA_FLAGS = [
  "sse4_2", "avx", "f16c", "fma", "avx2", "bmi2", "avx_vnni",
  "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd", "avx512_vnni", "avx512_bf16", "avx512vbmi",
  "amx_tile", "amx_int8", "amx_bf16",
] as const;

/** Where a run's or a golden's llama.cpp numbers were computed: the CPU, and the ggml CPU library that ran on it. */
export interface CpuIdentity {
  readonly model: string;
  /** The ggml CPU library (e.g. `zen4`, `haswell`, `x64`) the numbers came from; "not loaded" where no llama.cpp ran in the process that asked. */
  readonly variant: string;
  /** True where the variant was forced (`--cpu-variant`), false where ggml chose it. */
  readonly forced: boolean;
  /** The CPU's extensions from ISA_FLAGS, in that order. */
  readonly features: readonly string[];
}

/** The extensions of ISA_FLAGS this CPU has (empty off Linux: /proc/cpuinfo is the only source read). */
export function cpuFeatures(): readonly string[] {
  let cpuinfo: string;
  try {
    cpuinfo = readFileSync("/proc/cpuinfo", "utf8");
  } catch {
    return [];
  }
  const flags = new Set((/^flags\s*:(.*)$/m.exec(cpuinfo)?.[1] ?? "").trim().split(/\s+/));
  return ISA_FLAGS.filter((flag) => flags.has(flag));
}

/** ggml loads one libggml-cpu-<variant>.so per process; the mapped file names it (Linux). */
export function loadedCpuVariant(): string | undefined {
  try {
    return /libggml-cpu-(\w+)\.so/.exec(readFileSync("/proc/self/maps", "utf8"))?.[1];
  } catch {
    return undefined;
  }
}

/** The variant named by `--cpu-variant` or BENCH_CPU_VARIANT for this process tree, if any. */
export function forcedCpuVariant(): string | undefined {
  const name = process.env.BENCH_CPU_VARIANT;
  return name === undefined || name === "" ? undefined : name;
}

/**
 * This process's CPU identity. The variant is the library mapped into this process; where none is
 * yet, the forced one (every llama.cpp of the process tree will load it) or `fallback` (ggml's
 * own choice, which only a process that loaded llama.cpp can see).
 */
export function cpuIdentity(fallback = "not loaded"): CpuIdentity {
  const forced = forcedCpuVariant();
  return {
    model: cpus()[0]?.model ?? "unknown",
    variant: loadedCpuVariant() ?? forced ?? fallback,
    forced: forced !== undefined,
    features: cpuFeatures(),
  };
}
