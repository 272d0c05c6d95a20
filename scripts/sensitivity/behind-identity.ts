/**
 * Faults planted behind the identity check, per family: the float64 reference runner loads the
 * goldens' own file (identity must PASS) and computes with one quantity wrong by a chosen size,
 * selected by BENCH_REFERENCE_FAULT (scripts/runners/reference/sized_faults.py). So a catch here is
 * a numerical check seeing the fault, never the file's hash.
 */
import type { FaultFamily, FaultSize } from "./catalogue.js";

export const REFERENCE_FAULT_ENV = "BENCH_REFERENCE_FAULT";

/** Where each family's reference arm runs: llama in parity16's F32 place, the others as zoo-reference's arms. */
const FAMILY_ARMS: ReadonlyArray<{ readonly family: string; readonly args: readonly string[] }> = [
  { family: "llama", args: ["--suite", "parity16", "--runner", "python3 {bench}/scripts/runners/reference_forward.py {model}"] },
  { family: "qwen35", args: ["--suite", "zoo-reference", "--arm", "qwen35 reference"] },
  { family: "qwen35moe", args: ["--suite", "zoo-reference", "--arm", "qwen35moe reference"] },
  // The GELU-table arm: the exact-GELU arm's floor is looser than some faults (zoo-reference.json says why).
  { family: "gemma4", args: ["--suite", "zoo-reference", "--arm", "gemma4 reference, ggml GELU table"] },
  { family: "nemotron_h_moe", args: ["--suite", "zoo-reference", "--arm", "nemotron_h_moe reference"] },
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
  { fault: "weights_noise", what: "Gaussian noise, σ = size × the tensor's RMS, on every weight matrix", sizes: [0.001, 0.003, 0.01], label: (s) => `${+(s * 100).toPrecision(3)}%`, families: ALL },
  { fault: "rope_base", what: "every RoPE base × (1 + size)", sizes: [1.001, 1.003, 1.01], label: offset, families: ["llama", "qwen35", "qwen35moe", "gemma4"] },
  { fault: "norm_eps", what: "the RMS-norm ε × size", sizes: [2, 10], label: factor, families: ALL },
  { fault: "ssm_decay", what: "the recurrent decay rate (GatedDeltaNet / Mamba2 A) × size", sizes: [1.001, 1.01, 1.1], label: offset, families: RECURRENT },
  { fault: "conv_taps", what: "every causal-conv tap but the newest × size", sizes: [1.001, 1.01, 1.1], label: offset, families: RECURRENT },
  { fault: "router_temp", what: "router logits ÷ size (a temperature on the expert choice and weights)", sizes: [1.001, 1.01, 1.1], label: (s) => `T = ${s}`, families: ["qwen35moe", "nemotron_h_moe"] },
  { fault: "window", what: "the sliding window + size positions", sizes: [1, -1], label: (s) => `${s > 0 ? "+" : ""}${s}`, families: ["gemma4"] },
];

/** One family × fault, graded (the window's ±1 are variants). */
export function behindIdentityCatalogue(): FaultFamily[] {
  return FAMILY_ARMS.flatMap(({ family, args }) =>
    SIZED_FAULTS.filter((f) => f.families.includes(family)).map((f): FaultFamily => ({
      name: `${family}: ${f.fault}`,
      what: f.what,
      graded: f.fault !== "window",
      behindIdentity: true,
      sizes: f.sizes.map((size): FaultSize => ({
        label: f.label(size),
        prepare: async (_scratch, promptArgs) => ({ args: [...args, ...promptArgs], env: { [REFERENCE_FAULT_ENV]: `${f.fault}:${size}` } }),
      })),
    })),
  );
}
