import { InvalidArgumentError } from "commander";

/**
 * One box's share of a battery (`bench run --shard i/n`). The battery's arms — every arm each suite
 * would run with the same options, in suite order then arm order — are cut into units, and the
 * units dealt round-robin: the k-th unit (from 0, in battery order of its first arm) goes to shard
 * k mod n + 1. A unit is one arm with every arm that reads its results (a reuse arm's
 * `prefill_reference`), so no shard runs an arm whose reference ran elsewhere. Every box given the
 * same suites, options and n computes the same deal, with no coordination: the CI matrix is the scheduler.
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
  /** The label of the arm of the same suite whose results this one reads: the two are dealt to one shard. */
  readonly beside?: string;
}

/** An arm a shard was dealt, with its position in the battery (recorded in the shard's run, so the merge can undo the deal). */
export interface DealtArm {
  readonly suite: string;
  readonly arm: string;
  readonly position: number;
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

/** Each position's unit: arms linked by `beside` (directly or through others, a cycle included) share one; units are numbered in battery order of their first arm. */
function unitsOf(battery: readonly BatteryArm[]): number[] {
  const positions = new Map(battery.map((arm, position) => [armKey(arm), position]));
  const parent = battery.map((_, position) => position);
  const root = (position: number): number => (parent[position] === position ? position : (parent[position] = root(parent[position])));
  battery.forEach(({ suite, beside }, position) => {
    const referenced = beside === undefined ? undefined : positions.get(armKey({ suite, arm: beside }));
    // The earlier position becomes the root, so a unit's root is its first arm.
    if (referenced !== undefined) {
      const [a, b] = [root(position), root(referenced)];
      parent[Math.max(a, b)] = Math.min(a, b);
    }
  });
  const units = new Map<number, number>();
  return battery.map((_, position) => {
    const first = root(position);
    if (!units.has(first)) units.set(first, units.size);
    return units.get(first)!;
  });
}

/** The arms of `battery` that `shard` runs, in battery order, with their positions. */
export function dealtArms(battery: readonly BatteryArm[], shard: Shard): DealtArm[] {
  const units = unitsOf(battery);
  return battery.flatMap(({ suite, arm }, position) => ((units[position] % shard.count) + 1 === shard.index ? [{ suite, arm, position }] : []));
}

/** The arms of `battery` that `shard` runs, as `suite\0arm` keys. */
export function armsOfShard(battery: readonly BatteryArm[], shard: Shard): Set<string> {
  return new Set(dealtArms(battery, shard).map(armKey));
}

/**
 * The k-th arm a shard ran is at this position of the battery's order: the inverse of a deal made
 * before units existed (one arm per unit), for shard runs that do not record their dealt arms.
 */
export function positionInBattery(shard: Shard, k: number): number {
  return k * shard.count + (shard.index - 1);
}

export function armKey(arm: Pick<BatteryArm, "suite" | "arm">): string {
  return `${arm.suite}\u0000${arm.arm}`;
}
