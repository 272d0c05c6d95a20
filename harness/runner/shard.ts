import { InvalidArgumentError } from "commander";

/**
 * One box's share of a battery (`bench run --shard i/n`). The battery's arms — every arm each suite
 * would run with the same options, in suite order then arm order — are dealt round-robin: the k-th
 * arm (from 0) goes to shard k mod n + 1. Every box given the same suites, options and n computes
 * the same deal, with no coordination: the CI matrix is the scheduler.
 */
export interface Shard {
  /** 1-based. */
  readonly index: number;
  readonly count: number;
}

/** An arm of the battery, as the deal names it. */
export interface BatteryArm {
  readonly suite: string;
  readonly arm: string;
}

/** `--shard i/n`: 1 ≤ i ≤ n. */
export function parseShard(value: string): Shard {
  const match = /^(\d+)\/(\d+)$/.exec(value);
  const index = Number(match?.[1]);
  const count = Number(match?.[2]);
  if (match === null || count < 1 || index < 1 || index > count) throw new InvalidArgumentError("expected i/n with 1 ≤ i ≤ n, e.g. 2/4");
  return { index, count };
}

export function shardLabel(shard: Shard): string {
  return `${shard.index}/${shard.count}`;
}

/** Which shard runs the arm at `position` in the battery's order. */
export function shardOfPosition(position: number, count: number): number {
  return (position % count) + 1;
}

/** The k-th arm a shard ran is at this position of the battery's order (the inverse of the deal, for merging). */
export function positionInBattery(shard: Shard, k: number): number {
  return k * shard.count + (shard.index - 1);
}

/** The arms of `battery` that `shard` runs, as `suite\0arm` keys. */
export function armsOfShard(battery: readonly BatteryArm[], shard: Shard): Set<string> {
  return new Set(battery.filter((_, position) => shardOfPosition(position, shard.count) === shard.index).map(armKey));
}

export function armKey(arm: BatteryArm): string {
  return `${arm.suite}\u0000${arm.arm}`;
}
