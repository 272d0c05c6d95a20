import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { RunEvent } from "../harness/results/types.js";
import { runInLanes, type LaneTask } from "../harness/runner/suite-lanes.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("suite-lanes");
test.after(() => work.remove());
const runs = join(work.path, "runs");

/** A task that emits `name:0..n-1` over `ms`, recording when it ran in `spans`. */
function task(name: string, ms: number, spans: Map<string, [number, number]>, options: { alone?: boolean; device?: boolean; fails?: boolean } = {}): LaneTask {
  return {
    alone: options.alone ?? false,
    device: options.device ?? false,
    async run(emit) {
      const started = performance.now();
      for (let i = 0; i < 3; i++) {
        await emit({ kind: "notice", message: `${name}:${i}` });
        await sleep(ms / 3);
      }
      spans.set(name, [started, performance.now()]);
      if (options.fails) throw new Error(`${name} failed`);
    },
  };
}

const messages = (events: readonly RunEvent[]) => events.map((e) => (e.kind === "notice" ? e.message : e.kind));
const overlap = (a: [number, number], b: [number, number]) => a[0] < b[1] && b[0] < a[1];

test("lanes: a later task that ends first is held, then told in task order; two run at once, never three", async () => {
  const events: RunEvent[] = [];
  const spans = new Map<string, [number, number]>();
  await runInLanes([task("a", 150, spans), task("b", 30, spans), task("c", 30, spans)], 2, (e) => void events.push(e), () => false);
  assert.equal(messages(events), ["a:0", "a:1", "a:2", "b:0", "b:1", "b:2", "c:0", "c:1", "c:2"]);
  assert.ok(overlap(spans.get("a")!, spans.get("b")!), "a and b ran side by side");
  assert.ok(spans.get("c")![0] >= spans.get("b")![1], "c waited for a free lane");
});

test("lanes: a task that runs alone overlaps nothing; two device tasks never run at once, a device task beside another does", async () => {
  const spans = new Map<string, [number, number]>();
  await runInLanes([task("a", 60, spans), task("alone", 30, spans, { alone: true }), task("d1", 60, spans, { device: true }), task("d2", 30, spans, { device: true }), task("cpu", 30, spans)], 2, () => undefined, () => false);
  for (const other of ["a", "d1", "d2", "cpu"]) assert.not.ok(overlap(spans.get("alone")!, spans.get(other)!), `alone overlapped ${other}`);
  assert.not.ok(overlap(spans.get("d1")!, spans.get("d2")!), "two device tasks overlapped");
  assert.ok(overlap(spans.get("d2")!, spans.get("cpu")!) || overlap(spans.get("d1")!, spans.get("cpu")!), "a device task ran beside a CPU one");
});

test("lanes: after a failure no task starts, the running one finishes and is told, the earliest failure is thrown", async () => {
  const events: RunEvent[] = [];
  const spans = new Map<string, [number, number]>();
  const tasks = [task("slow", 120, spans), task("fails", 20, spans, { fails: true }), task("never", 20, spans)];
  const error = await runInLanes(tasks, 2, (e) => void events.push(e), () => false).then(() => undefined, (e: unknown) => e);
  assert.instance(error, Error);
  assert.is((error as Error).message, "fails failed");
  assert.equal(messages(events), ["slow:0", "slow:1", "slow:2", "fails:0", "fails:1", "fails:2"]);
  assert.not.ok(spans.has("never"));
});

/** What a run says and records that does not depend on how fast it ran. */
function timeless(text: string): string {
  return text.replace(/\b\d+(\.\d+)?(e-?\d+)? ?(ms|tok\/s)\b/g, "<t>").replace(/results in \S+/, "results in <dir>");
}

test("bench run of two suites, side by side (default) and one at a time (--jobs 1): the same output, verdicts, cells and provenance order; the legs overlapped", () => {
  const args = ["run", "--suite", "parity16", "--suite", "zoo-quick", "--arm", "F32", "--arm", "qwen35 F32", "--prompt", "0", "--prompt", "1", "--runs-dir", runs];
  const lanes = bench([...args, "--run-id", "lanes"]);
  assert.is(lanes.status, 0, lanes.stdout + lanes.stderr);
  const alone = bench([...args, "--jobs", "1", "--run-id", "alone"]);
  assert.is(alone.status, 0, alone.stdout + alone.stderr);
  assert.is(timeless(lanes.stdout), timeless(alone.stdout));
  const summary = (id: string) => JSON.parse(readFileSync(join(runs, id, "summary.json"), "utf8"));
  const [side, one] = [summary("lanes"), summary("alone")];
  const verdictsOf = (s: { verdicts: { suite: string; arm: string; check: string; status: string }[] }) => s.verdicts.map((v) => `${v.suite}/${v.arm}/${v.check}/${v.status}`);
  assert.equal(verdictsOf(side), verdictsOf(one));
  assert.equal(verdictsOf(side).slice(0, 2), ["parity16/F32/identity/pass", "parity16/F32/tokenizer/pass"]);
  const order = (rows: { suite: string; arm: string }[]) => rows.map((r) => `${r.suite}/${r.arm}`);
  assert.equal(order(side.suts), ["parity16/F32", "zoo-quick/qwen35 F32"]);
  assert.equal(order(side.legs), order(one.legs));
  assert.equal(side.oracles.map((o: { suite: string }) => o.suite), one.oracles.map((o: { suite: string }) => o.suite));
  const cells = (id: string) => readFileSync(join(runs, id, "cells.jsonl"), "utf8").split("\n").map(timeless);
  assert.equal(cells("lanes"), cells("alone"));
  const span = (leg: { started: string; duration_ms: number }): [number, number] => [Date.parse(leg.started), Date.parse(leg.started) + leg.duration_ms];
  assert.ok(overlap(span(side.legs[0]), span(side.legs[1])), `the two suites' legs overlapped: ${JSON.stringify(side.legs.map(span))}`);
  assert.not.ok(overlap(span(one.legs[0]), span(one.legs[1])), "--jobs 1 ran them one after the other");
});

test("--jobs takes a whole number of at least 1", () => {
  const result = bench(["run", "--jobs", "0"]);
  assert.is(result.status, 2, result.stdout + result.stderr);
  assert.match(result.stderr, /--jobs.*expected a whole number of at least 1/);
});

test.run();
