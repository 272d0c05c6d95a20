import { cpus, hostname, totalmem } from "node:os";

export interface MachineInfo {
  readonly hostname: string;
  readonly platform: string;
  readonly arch: string;
  readonly cpus: number;
  readonly cpu_model: string;
  readonly memory_bytes: number;
  readonly node: string;
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
  };
}

export function describeMachine(machine: MachineInfo): string {
  return `${machine.cpus} × ${machine.cpu_model}, ${(machine.memory_bytes / 2 ** 30).toFixed(0)} GiB, ${machine.platform}-${machine.arch}, Node ${machine.node}`;
}

/**
 * The hardware a run's numbers belong to: the same CPUs, memory and platform. The hostname and
 * Node version are left out: CI runners get a new hostname per job, and neither moves the numbers
 * the way a different machine does.
 */
export function machineFingerprint(machine: MachineInfo): string {
  return `${machine.cpus} × ${machine.cpu_model}, ${(machine.memory_bytes / 2 ** 30).toFixed(0)} GiB, ${machine.platform}-${machine.arch}`;
}
