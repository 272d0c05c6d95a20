import { readFileSync } from "node:fs";
import { BenchError } from "../errors.js";
import { boxProvenance } from "../box/config.js";
import { isDeviceArm } from "../box/leg.js";
import { sha256Bytes } from "../io/sha256.js";
import type { RunDirectory } from "../results/run-directory.js";
import type { RunListener } from "../results/types.js";
import { loadSuite, type Suite } from "../suites/load.js";
import { llamaServerPath, needsLlamaServer } from "../sut/llama-server-binary.js";
import { armCommand, assertArmsExist } from "./arm-selection.js";
import type { Battery, LegArm } from "./kinds/kind.js";
import { suiteKind } from "./kinds/registry.js";
import { runLegs } from "./legs.js";
import { resolveOptions, type ResolvedRunOptions, type RunOptions } from "./run-options.js";
import { armKey, dealtArms, type BatteryArm } from "../suites/shard.js";
import { runInLanes, type LaneTask } from "./suite-lanes.js";

/**
 * Arms on llama.cpp's own server need it built (scripts/build-llama-server.sh). Where it is not,
 * the run leaves them out and says so, so `bench run` on a fresh clone still runs everything else;
 * with BENCH_REQUIRE_LLAMA_SERVER=1 (CI, which builds it) their absence is an error instead.
 */
async function noteArmsWithoutLlamaServer(suites: readonly Suite[], options: ResolvedRunOptions, emit: RunListener): Promise<void> {
  if (options.llamaServerBuilt || options.arms !== undefined) return;
  const left = suites.flatMap((suite) => (suite.arms as readonly { label: string; command?: readonly string[] }[]).filter(needsLlamaServer).map((arm) => `${suite.name} / ${arm.label}`));
  if (left.length === 0) return;
  if (process.env.BENCH_REQUIRE_LLAMA_SERVER === "1") {
    throw new BenchError(`BENCH_REQUIRE_LLAMA_SERVER=1 but llama-server is not built (${llamaServerPath()}); ${left.length} arm(s) need it`, { field: "BENCH_REQUIRE_LLAMA_SERVER", fix: "run scripts/build-llama-server.sh first" });
  }
  await emit({ kind: "notice", message: `note: ${left.length} arm(s) on llama.cpp's llama-server left out, it is not built (${left.join(", ")}): scripts/build-llama-server.sh builds it once (a few minutes)` });
}


/** Why no arm of the run's suites can run, with the fix that applies. */
function nothingToRun(suites: readonly Suite[], options: ResolvedRunOptions): BenchError {
  const names = suites.map((s) => s.name).join(", ");
  if (options.runner !== undefined) {
    return new BenchError(`no arm of ${names} can run with --runner`, { field: "--runner", fix: "a runner replaces model arms only: run server, reuse, speculative and tokenizer suites without --runner" });
  }
  if (!options.llamaServerBuilt && suites.some((suite) => (suite.arms as readonly { command?: readonly string[] }[]).some(needsLlamaServer))) {
    return new BenchError(`no arm of ${names} can run: its arms need llama.cpp's llama-server, which is not built (${llamaServerPath()})`, { field: "arms", fix: "build it once: scripts/build-llama-server.sh (a few minutes)" });
  }
  return new BenchError(`no arm of ${names} can run with these options`, { field: "--arm", fix: "name arms the suites have, or drop the options that exclude them" });
}

/** The battery's side of every suite kind, for this run. */
function batteryOf(options: ResolvedRunOptions, recorder: RunDirectory, emit: RunListener): Battery {
  return {
    options, recorder, emit,
    legs: (suite, arms, open, runArm) => runLegs(suite, arms, open, options, recorder, emit, runArm, (arm) => reproduce(suite, arm)),
    reproduce,
  };
  function reproduce(suite: Suite, arm: LegArm & { readonly model?: string }): string {
    const kind = suiteKind(suite);
    return kind.reproduce !== undefined ? kind.reproduce(suite, arm, options) : armCommand(suite, arm, options);
  }
}

/**
 * Runs suites arm by arm: resolve and validate every suite first (bad input fails before any work),
 * deal the battery's (suite, arm) legs to this run's shard, then hand each suite's share to its kind
 * (harness/runner/kinds/), which opens what its arms share and runs them as legs. Suites that may
 * share the machine run `jobs` at a time (suite-lanes.ts), their events and provenance kept in
 * the battery's order. Emits events; never prints.
 */
export async function runBattery(input: RunOptions, recorder: RunDirectory, emit: RunListener): Promise<BatteryDeal> {
  const unsharded = resolveOptions(input, recorder, emit);
  try {
    const suites = unsharded.suites.map((name) => loadSuite(name));
    assertArmsExist(suites, unsharded);
    for (const kind of new Set(suites.map(suiteKind))) kind.checkSelection?.(suites.filter((suite) => suiteKind(suite) === kind), unsharded);
    await noteArmsWithoutLlamaServer(suites, unsharded, emit);
    const planned = suites.map((suite) => ({ suite, arms: suiteKind(suite).arms(suite, unsharded) })).filter(({ arms }) => arms.length > 0);
    if (planned.length === 0) throw nothingToRun(suites, unsharded);
    recorder.provenance.box = boxProvenance(unsharded.box.settings);
    const legs = planned.flatMap(({ suite, arms }) => arms.map((arm) => ({ suite: suite.name, arm: arm.label, beside: suiteKind(suite).referenceOf?.(arm) })));
    const options = shardOptions(unsharded, legs, recorder);
    const dealtLegs = legs.filter((leg) => options.inShard(leg.suite, leg.arm));
    options.box.numberLegs(dealtLegs);
    const deal = { batteryArms: legs.length, arms: dealtLegs.map((leg) => `${leg.suite}/${leg.arm}`) };
    const tasks = planned.map(({ suite, arms }): LaneTask => {
      const dealt = arms.filter((arm) => options.inShard(suite.name, arm.label));
      return {
        alone: suiteKind(suite).sharesMachine?.(suite, options) !== true,
        device: dealt.some(isDeviceArm),
        run: async (emit) => {
          // Every shard records every suite of the battery (bench merge checks they ran the same ones), whether or not it has arms of it.
          recorder.provenance.suites.push({ name: suite.name, path: suite.path, sha256: sha256Bytes(readFileSync(suite.path)) });
          if (dealt.length > 0) await suiteKind(suite).run(suite, dealt, batteryOf(options, recorder, emit));
        },
      };
    });
    try {
      await runInLanes(tasks, options.jobs, emit, () => options.signal.aborted);
    } finally {
      inBatteryOrder(recorder, planned.map(({ suite }) => suite.name));
    }
    return deal;
  } finally {
    await unsharded.box.close();
  }
}

/** Suites that ran side by side recorded their provenance as they went: put it back in the battery's order (bench merge reads the arms' order from it). */
function inBatteryOrder(recorder: RunDirectory, suites: readonly string[]): void {
  const bySuite = <Row>(rows: Row[], suiteOf: (row: Row) => string) => rows.sort((a, b) => suites.indexOf(suiteOf(a)) - suites.indexOf(suiteOf(b)));
  const { provenance } = recorder;
  bySuite(provenance.suites, (row) => row.name);
  for (const rows of [provenance.oracles, provenance.suts, provenance.trace, provenance.legs]) bySuite<{ readonly suite: string }>(rows, (row) => row.suite);
}

/** The arms a run was dealt (`suite/arm`; all of them, unsharded) out of how many the battery has. */
export interface BatteryDeal {
  readonly arms: readonly string[];
  readonly batteryArms: number;
}

/** The options limited to the run's shard (an empty share runs nothing); the run records the arms it was dealt and their battery positions, for bench merge. */
function shardOptions(options: ResolvedRunOptions, battery: readonly BatteryArm[], recorder: RunDirectory): ResolvedRunOptions {
  if (options.shard === undefined) return options;
  const dealt = dealtArms(battery, options.shard);
  const selection = recorder.provenance.selection;
  if (selection?.shard !== undefined) recorder.provenance.selection = { ...selection, shard: { ...selection.shard, dealt } };
  const mine = new Set(dealt.map(armKey));
  return { ...options, inShard: (suite, arm) => mine.has(armKey({ suite, arm })) };
}
