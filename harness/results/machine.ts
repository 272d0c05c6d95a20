import { cpus, hostname, totalmem } from "node:os";
import { cpuIdentity, type CpuIdentity } from "../cpu/cpu-identity.js";
import { defaultCpuVariant } from "../cpu/forced-variant.js";

export interface MachineInfo {
  readonly hostname: string;
  readonly platform: string;
  readonly arch: string;
  readonly cpus: number;
  readonly cpu_model: string;
  readonly memory_bytes: number;
  readonly node: string;
  /** The ggml CPU library llama.cpp computes with here (absent from runs recorded before it was). */
  readonly ggml_cpu?: Pick<CpuIdentity, "variant" | "forced" | "features">;
}

export function machineInfo(): MachineInfo {
  const list = cpus();
  return {
    hostname: hostname(),
    platform: process.platform,
    arch: process.arch,
    cpus: list.length,
    cpu_model: list[0]?.model ?? "unknown",
    memory_bytes: totalmem(),
    node: process.version,
    ggml_cpu: ggmlCpu(),
  };
}

/** The variant in use: forced, or mapped into this process, or the one ggml picks here (every llama.cpp this run starts picks the same). */
function ggmlCpu(): NonNullable<MachineInfo["ggml_cpu"]> {
  const { variant, forced, features } = cpuIdentity("");
  return { variant: variant === "" ? defaultCpuVariant() : variant, forced, features };
}

export function describeMachine(machine: MachineInfo): string {
  const ggml = machine.ggml_cpu === undefined ? "" : `, ggml CPU variant ${machine.ggml_cpu.variant}${machine.ggml_cpu.forced ? " (forced)" : ""}`;
  return `${machine.cpus} × ${machine.cpu_model}, ${(machine.memory_bytes / 2 ** 30).toFixed(0)} GiB, ${machine.platform}-${machine.arch}, Node ${machine.node}${ggml}`;
}

/**
 * The hardware a run's numbers belong to: the same CPUs, memory and platform. The hostname and
 * Node version are left out: CI runners get a new hostname per job, and neither moves the numbers
 * the way a different machine does.
 */
export function machineFingerprint(machine: MachineInfo): string {
  return `${machine.cpus} × ${machine.cpu_model}, ${(machine.memory_bytes / 2 ** 30).toFixed(0)} GiB, ${machine.platform}-${machine.arch}`;
}
