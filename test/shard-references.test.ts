import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SUITES_DIR } from "../harness/paths.js";
import { armKey, armsOfShard, dealtArms } from "../harness/suites/shard.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

// An arm that reads another arm's results (a reuse arm's prefill_reference) is dealt with it: a
// shard never runs a chunked arm whose reference ran on another box (SKIPPED, exit 77), and bench
// merge puts every arm back at its battery position, which round-robin no longer gives.

test("the deal keeps an arm with the arms it references (a chain, any order), round-robin over those units; every arm on one shard", () => {
  const battery = [
    { suite: "reuse", arm: "a" }, { suite: "reuse", arm: "a chunk", beside: "a" }, { suite: "reuse", arm: "b" },
    // Referenced before it appears, through a chain: c1 → c, c2 → c1.
    { suite: "reuse", arm: "c2", beside: "c1" }, { suite: "reuse", arm: "c" }, { suite: "reuse", arm: "c1", beside: "c" },
    // A label of another suite, an unknown label and a cycle end a chain where they are.
    { suite: "parity", arm: "a" }, { suite: "parity", arm: "x", beside: "no such arm" }, { suite: "parity", arm: "p", beside: "q" }, { suite: "parity", arm: "q", beside: "p" },
  ];
  const names = (index: number) => dealtArms(battery, { index, count: 3 }).map((d) => `${d.arm}@${d.position}`);
  assert.equal([names(1), names(2), names(3)], [
    ["a@0", "a chunk@1", "a@6"],
    ["b@2", "x@7"],
    ["c2@3", "c@4", "c1@5", "p@8", "q@9"],
  ]);
  const shards = [1, 2, 3].map((index) => armsOfShard(battery, { index, count: 3 }));
  assert.equal(battery.map((arm) => shards.filter((s) => s.has(armKey(arm))).length), Array(battery.length).fill(1));
});

test("bench run --suite reuse --shard: the chunked arm runs beside its reference (reuse_prefill passes, not SKIPPED) and bench merge restores the battery's order", () => {
  const work = temporaryDirectory("shard-references");
  try {
    const shipped = JSON.parse(readFileSync(join(SUITES_DIR, "reuse.json"), "utf8")) as { arms: { label: string }[] };
    // Only the prefix scenario runs: an arm's declared reuse is cut to it.
    const arm = (label: string) => {
      const found = shipped.arms.find((a) => a.label === label)! as { label: string; expect_reuse?: Record<string, number> };
      return found.expect_reuse === undefined ? found : { ...found, expect_reuse: { prefix: found.expect_reuse.prefix } };
    };
    // Round-robin over arms would deal the chunked arm (position 1) away from its reference (position 0).
    const arms = [arm("server tiny-random"), arm("server tiny-random chunk 7"), { ...arm("server tiny-random"), label: "server tiny-random b32", settings: { batch_size: 32 } }];
    const suite = join(work.path, "reuse-slice.json");
    writeFileSync(suite, JSON.stringify({ ...shipped, $schema: undefined, name: "reuse-slice", prompt_tokens: 40, split_points: ["5"], scenarios: ["prefix"], arms }));
    const runs = join(work.path, "runs");
    for (const index of [1, 2]) {
      const run = bench(["run", "--suite", suite, "--shard", `${index}/2`, "--runs-dir", runs, "--run-id", `shard-${index}`]);
      assert.is(run.status, 0, run.stdout + run.stderr);
    }
    const dealt = (index: number) => (JSON.parse(readFileSync(join(runs, `shard-${index}`, "summary.json"), "utf8")) as { selection: { shard: { dealt: { arm: string; position: number }[] } } }).selection.shard.dealt;
    assert.equal(dealt(1).map((d) => [d.arm, d.position]), [["server tiny-random", 0], ["server tiny-random chunk 7", 1]]);
    assert.equal(dealt(2).map((d) => [d.arm, d.position]), [["server tiny-random b32", 2]]);
    const merged = join(work.path, "merged");
    const merge = bench(["merge", "shard-1", "shard-2", "--runs-dir", runs, "--out", merged]);
    assert.is(merge.status, 0, merge.stdout + merge.stderr);
    const verdicts = (JSON.parse(readFileSync(join(merged, "summary.json"), "utf8")) as { verdicts: { arm: string; check: string; status: string }[] }).verdicts;
    assert.equal([...new Set(verdicts.map((v) => v.arm))], ["server tiny-random", "server tiny-random chunk 7", "server tiny-random b32"], "the battery's order, not round-robin's inverse");
    assert.is(verdicts.find((v) => v.check === "reuse_prefill")?.status, "pass");
  } finally {
    work.remove();
  }
});

test.run();
