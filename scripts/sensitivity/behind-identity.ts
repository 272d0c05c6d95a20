/**
 * Faults planted behind the identity check, per family: the float64 reference runner loads the
 * goldens' own file (identity must PASS) and computes with one quantity wrong by a chosen size,
 * selected by BENCH_REFERENCE_FAULT (harness/oracle/float64/reference/sized_faults.py). So a catch here is
 * a numerical check seeing the fault, never the file's hash.
 */
import type { FaultFamily, FaultSize } from "./catalogue.js";

export const REFERENCE_FAULT_ENV = "BENCH_REFERENCE_FAULT";

const REFERENCE_RUNNER = "python3 {bench}/harness/oracle/float64/reference_forward.py {model}";

/**
 * Where each family's faulted reference runs: in the place of the family's F32 arm (parity16 for
 * llama, zoo for the others), held to the bounds a bring-up's own SUT is held to — not to
 * zoo-reference's tighter cross-oracle bounds, which exist for the reference alone. gemma4 is the
 * exception: the reference's clean floor there (llama.cpp's fp16 GELU table) is above zoo's RMS Δp
 * bound, so it runs as zoo-reference's GELU-table arm, under that arm's own bounds.
 */
const FAMILY_ARMS: ReadonlyArray<{ readonly family: string; readonly args: readonly string[]; readonly only?: readonly string[]; readonly sizes?: Readonly<Record<string, readonly number[]>> }> = [
  { family: "llama", args: ["--suite", "parity16", "--runner", REFERENCE_RUNNER] },
  { family: "gemma4", args: ["--suite", "zoo-reference", "--arm", "gemma4 reference, ggml GELU table"] },
  ...["qwen35", "qwen35moe", "nemotron_h_moe"].map((family) => ({ family, args: ["--suite", "zoo", "--arm", `${family} F32`, "--runner", REFERENCE_RUNNER] })),
  // Partial RoPE (16 of 64 dimensions, one layer of four): the phase error grows with the position, so 128 positions.
  ...["qwen35", "qwen35moe"].map((family) => ({ family: `${family} (zoo-long)`, args: ["--suite", "zoo-long", "--arm", `${family} F32`, "--runner", REFERENCE_RUNNER], only: ["rope_base"] })),
  // L = 4000 (zoo-4k-reference, under zoo-4k's bounds): the faults that only long context shows, each at its weakest size.
  ...[
    { family: "qwen35", only: ["rope_base", "state_reset", "kv_wrap"] },
    { family: "qwen35moe", only: ["rope_base", "state_reset", "kv_wrap"] },
    { family: "gemma4", only: ["window", "kv_wrap"] },
    { family: "nemotron_h_moe", only: ["state_reset", "kv_wrap"] },
  ].map(({ family, only }) => ({ family: `${family} (zoo-4k)`, args: ["--suite", "zoo-4k-reference", "--arm", `${family} reference${family === "gemma4" ? ", ggml GELU table" : ""}`], only, sizes: { rope_base: [1.001], kv_wrap: [3984, 3000] } })),
];

interface SizedFault {
  readonly fault: string;
  readonly what: string;
  readonly sizes: readonly number[];
  readonly label: (size: number) => string;
  readonly families: readonly string[];
}

const factor = (size: number): string => `×${size}`;
const offset = (size: number): string => `${size >= 1 ? "+" : ""}${+((size - 1) * 100).toPrecision(3)}%`;
const ALL = FAMILY_ARMS.map((a) => a.family);
const RECURRENT = ["qwen35", "qwen35moe", "nemotron_h_moe"];

const SIZED_FAULTS: readonly SizedFault[] = [
  { fault: "weights_noise", what: "Gaussian noise, σ = size × the tensor's RMS, on every weight matrix", sizes: [0.001, 0.003, 0.01, 0.03], label: (s) => `${+(s * 100).toPrecision(3)}%`, families: ALL },
  { fault: "rope_base", what: "every RoPE base × size", sizes: [1.001, 1.003, 1.01, 1.03], label: offset, families: ["llama", "qwen35", "qwen35moe", "gemma4"] },
  { fault: "norm_eps", what: "the RMS-norm ε × size", sizes: [2, 10, 100], label: factor, families: ALL },
  { fault: "ssm_decay", what: "the recurrent decay rate (GatedDeltaNet / Mamba2 A) × size", sizes: [1.001, 1.01, 1.1], label: offset, families: RECURRENT },
  { fault: "conv_taps", what: "every causal-conv tap but the newest × size", sizes: [1.001, 1.01, 1.1], label: offset, families: RECURRENT },
  { fault: "router_temp", what: "router logits ÷ size (a temperature on the expert choice and weights)", sizes: [1.001, 1.01, 1.1], label: (s) => `T = ${s}`, families: ["qwen35moe", "nemotron_h_moe"] },
  { fault: "window", what: "the sliding window + size positions", sizes: [1, -1], label: (s) => `${s > 0 ? "+" : ""}${s}`, families: ["gemma4"] },
  // Fewer tokens between resets, or fewer cells, is a larger fault: the sizes fall.
  { fault: "state_reset", what: "the recurrent state zeroed after every size tokens fed (a prefill chunk boundary that loses it)", sizes: [2048, 512], label: (s) => `every ${s} tokens`, families: [] },
  { fault: "kv_wrap", what: "each attention layer's KV cache holds size cells; a later position overwrites the oldest", sizes: [3984, 3000], label: (s) => `${s} cells`, families: [] },
];

/** One family × fault, graded (the window's ±1 are variants). */
export function behindIdentityCatalogue(): FaultFamily[] {
  return FAMILY_ARMS.flatMap(({ family, args, only, sizes }) =>
    SIZED_FAULTS.filter((f) => (only === undefined ? f.families.includes(family) : only.includes(f.fault))).map((f): FaultFamily => ({
      name: `${family}: ${f.fault}`,
      what: f.what,
      graded: f.fault !== "window",
      behindIdentity: true,
      control: { label: "clean", prepare: async (_scratch, promptArgs) => ({ args: [...args, ...promptArgs] }) },
      sizes: (sizes?.[f.fault] ?? f.sizes).map((size): FaultSize => ({
        label: f.label(size),
        prepare: async (_scratch, promptArgs) => ({ args: [...args, ...promptArgs], env: { [REFERENCE_FAULT_ENV]: `${f.fault}:${size}` } }),
      })),
    })),
  );
}
