import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rename, rm } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { BenchError } from "../errors.js";
import { armKey, positionInBattery, shardLabel, type Shard } from "../suites/shard.js";
import { EXIT, type ExitCode } from "./exit-code.js";
import type { StoredRun } from "./read-run.js";
import { RunDirectory, type RunSelection } from "./run-directory.js";
import type { CellRecord, GateVerdict } from "./types.js";
import { exitCodeFor } from "./verdicts.js";

/** A shard run, with its place in the deal. */
interface ShardRun {
  readonly run: StoredRun;
  readonly shard: Shard;
}

const summaryPath = (run: StoredRun) => join(run.directory, "summary.json");
const named = (run: StoredRun) => `run ${run.summary.run_id}`;

/** The selection a run was made with, its shard left out: every shard of one battery has the same. */
function selectionWithoutShard(selection: RunSelection): string {
  const { shard: _shard, ...rest } = selection;
  return JSON.stringify(rest);
}

/**
 * Proves that `runs` are the shards of one battery: each made with `--shard i/n` for the same n,
 * every i exactly once, of one commit and harness version, with the same options, the same suite
 * files and the same goldens, and no arm in two of them. Returns them in shard order, and a warning
 * when no run knows its commit. Any other set is refused with a one-line reason (exit 2).
 */
export function checkShardsJoin(runs: readonly StoredRun[]): { readonly shards: ShardRun[]; readonly warning: string | undefined } {
  if (runs.length === 0) throw new BenchError("no runs to merge", { fix: "name the shard runs: bench merge RUN... --out DIR" });
  const shards = runs.map((run) => {
    const shard = run.summary.selection?.shard;
    if (shard === undefined) throw new BenchError(`${named(run)} was not made with --shard: it is not a shard of a battery`, { file: summaryPath(run), field: "selection.shard", fix: "merge the runs of `bench run --shard i/n`, one for each i" });
    return { run, shard };
  });
  const [first] = shards;
  const differ = (other: ShardRun, what: string, a: string, b: string, field: string) =>
    new BenchError(`${named(first.run)} and ${named(other.run)} ${what} (${a} vs ${b})`, { file: summaryPath(other.run), field, fix: "merge only the shards of one workflow run: same commit, same options, same suites and goldens" });
  for (const other of shards.slice(1)) {
    if (other.shard.count !== first.shard.count) throw differ(other, "split the battery differently", `${first.shard.count} shards`, `${other.shard.count}`, "selection.shard.count");
    const [commitA, commitB] = [first.run.summary.commit ?? null, other.run.summary.commit ?? null];
    if (commitA !== commitB) throw differ(other, "were made from different commits", commitA ?? "unknown", commitB ?? "unknown", "commit");
    if (other.run.summary.harness_version !== first.run.summary.harness_version) throw differ(other, "were made by different harness versions", first.run.summary.harness_version, other.run.summary.harness_version, "harness_version");
    const [selectionA, selectionB] = [first.run.summary.selection!, other.run.summary.selection!].map(selectionWithoutShard);
    if (selectionA !== selectionB) throw differ(other, "were made with different options", selectionA, selectionB, "selection");
    const suites = (run: StoredRun) => run.summary.suites.map((suite) => `${suite.name} sha256 ${suite.sha256.slice(0, 12)}`).join(", ");
    if (suites(first.run) !== suites(other.run)) throw differ(other, "ran different suites", suites(first.run), suites(other.run), "suites");
  }
  const goldens = new Map<string, { run: StoredRun; identity: string }>();
  for (const { run } of shards) {
    for (const oracle of run.summary.oracles ?? []) {
      const key = `${oracle.suite} ${basename(dirname(oracle.goldens))}/${basename(oracle.goldens)}`;
      const identity = JSON.stringify({ model: oracle.model, oracle: oracle.oracle });
      const seen = goldens.get(key);
      if (seen !== undefined && seen.identity !== identity) {
        throw new BenchError(`${named(seen.run)} and ${named(run)} hold ${key} to different goldens (their manifests differ)`, { file: summaryPath(run), field: "oracles", fix: "merge only the shards of one workflow run: same commit, same options, same suites and goldens" });
      }
      goldens.set(key, { run, identity });
    }
  }
  const byIndex = new Map<number, ShardRun>();
  for (const shard of shards) {
    const twin = byIndex.get(shard.shard.index);
    if (twin !== undefined) throw new BenchError(`shard ${shardLabel(shard.shard)} given twice: ${named(twin.run)} and ${named(shard.run)}`, { file: summaryPath(shard.run), field: "selection.shard", fix: "give each shard's run once" });
    byIndex.set(shard.shard.index, shard);
  }
  const missing = Array.from({ length: first.shard.count }, (_, i) => i + 1).filter((index) => !byIndex.has(index));
  if (missing.length > 0) {
    throw new BenchError(`shard${missing.length === 1 ? "" : "s"} ${missing.map((i) => `${i}/${first.shard.count}`).join(", ")} missing (given: ${[...byIndex.keys()].sort((a, b) => a - b).map((i) => `${i}/${first.shard.count}`).join(", ")})`, { field: "RUN", fix: "wait for every shard's job and pass all their runs; a box that never ran its shard leaves its arms untested" });
  }
  const ordered = [...byIndex.values()].sort((a, b) => a.shard.index - b.shard.index);
  const owner = new Map<string, ShardRun>();
  for (const shard of ordered) {
    for (const arm of armsInOrder(shard.run)) {
      const other = owner.get(arm);
      if (other !== undefined) throw new BenchError(`arm ${arm.replace("\u0000", "/")} ran in both ${named(other.run)} (shard ${shardLabel(other.shard)}) and ${named(shard.run)} (shard ${shardLabel(shard.shard)})`, { file: summaryPath(shard.run), field: "verdicts", fix: "shards of one battery never share an arm: rerun them with the same options and one n" });
      owner.set(arm, shard);
    }
  }
  const warning = ordered.every((s) => (s.run.summary.commit ?? null) === null) ? "no shard run records its commit (not made in a git checkout, no GITHUB_SHA): they cannot be proven to test the same code" : undefined;
  return { shards: ordered, warning };
}

/** A run's arms (`suite\0arm`) in the order it ran them: the order their SUTs were opened, then any arm known only by its verdicts or cells. */
function armsInOrder(run: StoredRun): string[] {
  const keys = [...run.summary.suts, ...run.summary.verdicts, ...run.cells].map((row) => `${row.suite}\u0000${row.arm}`);
  return [...new Set(keys)];
}

/**
 * Joins shard runs into one run directory at `out`, in the battery's order (the deal undone), so
 * that bench gate and bench report read it as any run. Its exit code is derived from the merged
 * verdicts; a shard that did not complete makes the merged run end in that status, exit 2, with
 * the shard named. Written beside `out` and renamed into place: never half there.
 */
export async function writeMergedRun(shards: readonly ShardRun[], out: string, command: readonly string[]): Promise<{ readonly directory: string; readonly exitCode: ExitCode; readonly verdicts: readonly GateVerdict[] }> {
  const target = resolve(out);
  if (existsSync(target)) throw new BenchError("the merged run's directory already exists", { file: target, fix: "choose another --out, or remove it" });
  const arms = shards.flatMap(({ run, shard }) => {
    // Where the shard recorded its deal, each arm's own position; a shard run from before it did, the round-robin inverse.
    const dealt = new Map(run.summary.selection?.shard?.dealt?.map((d) => [armKey(d), d.position]));
    return armsInOrder(run).map((key, k) => ({ key, position: dealt.get(key) ?? positionInBattery(shard, k) }));
  }).sort((a, b) => a.position - b.position).map((a) => a.key);
  const byArm = <T extends { readonly suite: string; readonly arm: string }>(rows: readonly T[]) =>
    arms.flatMap((key) => rows.filter((row) => `${row.suite}\u0000${row.arm}` === key));
  const all = <T>(pick: (run: StoredRun) => readonly T[] | undefined) => shards.flatMap(({ run }) => [...(pick(run) ?? [])]);

  const unfinished = shards.find(({ run }) => run.summary.status !== "complete");
  const earliest = shards.map(({ run }) => run.summary.started).sort()[0];
  await mkdir(dirname(target), { recursive: true });
  const staging = await mkdtemp(join(dirname(target), `.${basename(target)}.merging-`));
  try {
    const recorder = new RunDirectory(basename(target), staging, command, { started: earliest, machine: shards[0].run.summary.machine });
    const { shard: _shard, ...selection } = shards[0].run.summary.selection!;
    recorder.provenance.selection = selection;
    recorder.provenance.commit = shards[0].run.summary.commit ?? null;
    recorder.provenance.mergedFrom = shards.map(({ run, shard }) => ({ run_id: run.summary.run_id, shard: shardLabel(shard), status: run.summary.status, exit_code: run.summary.exit_code, machine: run.summary.machine }));
    recorder.provenance.suites.push(...shards[0].run.summary.suites);
    const oracles = new Map(all((run) => run.summary.oracles).map((o) => [JSON.stringify(o), o]));
    recorder.provenance.oracles.push(...oracles.values());
    recorder.provenance.suts.push(...byArm(all((run) => run.summary.suts)));
    recorder.provenance.trace.push(...byArm(all((run) => run.summary.trace)));
    recorder.provenance.memory.push(...byArm(all((run) => run.summary.memory)));
    await recorder.open();
    await recorder.record({ kind: "cells", cells: byArm<CellRecord>(all((run) => run.cells)) });
    const verdicts = byArm(all((run) => run.summary.verdicts));
    for (const verdict of verdicts) await recorder.record({ kind: "verdict", verdict });
    // Summary lines name their arm in their text only; each was written at an arm's end, and is recorded again as one.
    for (const line of all((run) => run.summary.summary_lines)) await recorder.record({ kind: "arm-end", suite: "", arm: "", summaryLine: line });
    const exitCode: ExitCode = unfinished === undefined ? exitCodeFor(verdicts) : EXIT.error;
    const reason = unfinished === undefined ? undefined
      : `shard ${shardLabel(unfinished.shard)} (run ${unfinished.run.summary.run_id}) is ${unfinished.run.summary.status}${unfinished.run.summary.error === undefined ? "" : `: ${unfinished.run.summary.error}`}`;
    await recorder.flush(unfinished === undefined ? "complete" : unfinished.run.summary.status === "interrupted" ? "interrupted" : "error", exitCode, reason);
    await rename(recorder.directory, target);
    return { directory: target, exitCode, verdicts };
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}
