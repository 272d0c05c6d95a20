import { existsSync } from "node:fs";
import { cpus } from "node:os";
import { cpuSeconds, descendants } from "../harness/io/procfs.js";
import { distribution } from "../harness/stats/distribution.js";

/**
 * A benchmark round is only a figure if the machine was not busy with other work while it ran: on
 * a shared 2-core box, another process's burst slows one round of one side and the ratio moves by
 * half. This measures the CPU that processes outside this benchmark's own tree (this process, the
 * servers it started, every tool it ran) used during a round, in cores, and repeats a busy round.
 */

/** Average cores of other processes' work during a round above which the round is measured again (BENCH_BUSY_CORES overrides). */
const BUSY_FOREIGN_CORES = Number(process.env.BENCH_BUSY_CORES ?? 0.25);
/** How often a busy round is measured in all (BENCH_BUSY_ATTEMPTS overrides; 1: never again); the quietest is kept. */
const ATTEMPTS = Math.max(1, Number.parseInt(process.env.BENCH_BUSY_ATTEMPTS ?? "2", 10) || 1);

/** CPU seconds every core has spent busy since boot (user, nice, system, irq). */
function machineBusySeconds(): number {
  return cpus().reduce((sum, cpu) => sum + cpu.times.user + cpu.times.nice + cpu.times.sys + cpu.times.irq, 0) / 1000;
}

/** CPU seconds this process, its live descendants and every child they reaped have used (Linux /proc, 10 ms ticks). */
export function ownTreeSeconds(): number {
  return [process.pid, ...descendants(process.pid)].reduce((sum, pid) => sum + cpuSeconds(pid, true), 0);
}

export interface QuietRound<T> {
  readonly value: T;
  /** Cores of other processes' work during the kept attempt; undefined where /proc is not there to tell. */
  readonly foreignCores: number | undefined;
  readonly attempts: number;
  /** Every attempt was busy: the kept value is the quietest of them, not a quiet-machine figure. */
  readonly busy: boolean;
}

/** Runs one round, measuring it again while other processes kept the machine busy; keeps the quietest attempt. */
export async function quietRound<T>(run: () => Promise<T>, onBusy?: (foreignCores: number, attempt: number) => void): Promise<QuietRound<T>> {
  const measurable = existsSync(`/proc/${process.pid}/stat`);
  let kept: { value: T; foreignCores: number } | undefined;
  let attempts = 0;
  while (attempts < ATTEMPTS) {
    attempts++;
    const machineBefore = machineBusySeconds();
    const ownBefore = measurable ? ownTreeSeconds() : 0;
    const startedMs = performance.now();
    const value = await run();
    const wallS = (performance.now() - startedMs) / 1000;
    if (!measurable) return { value, foreignCores: undefined, attempts, busy: false };
    // /proc counts in 10 ms ticks: a round of a few seconds reads within a few hundredths of a core.
    const foreignCores = Math.max(0, (machineBusySeconds() - machineBefore) - (ownTreeSeconds() - ownBefore)) / wallS;
    if (kept === undefined || foreignCores < kept.foreignCores) kept = { value, foreignCores };
    if (foreignCores <= BUSY_FOREIGN_CORES) break;
    if (attempts < ATTEMPTS) onBusy?.(foreignCores, attempts);
  }
  return { ...kept!, attempts, busy: kept!.foreignCores > BUSY_FOREIGN_CORES };
}

/** "median 412 (spread 398–431, ±4.0%)": one side's figure over its rounds; the ± is half the range over the median. */
export function describeSpread(values: readonly number[], digits = 0): string {
  const { median, min, max } = distribution(values)!;
  return `median ${median.toFixed(digits)} (spread ${min.toFixed(digits)}–${max.toFixed(digits)}, ±${median === 0 ? "–" : (((max - min) / 2 / median) * 100).toFixed(1)}%)`;
}
