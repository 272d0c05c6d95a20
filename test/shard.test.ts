import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { armKey, armsOfShard, parseShard, positionInBattery } from "../harness/suites/shard.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const battery = ["a", "b", "c", "d", "e"].map((arm, i) => ({ suite: i < 3 ? "parity" : "kernels", arm }));

test("the deal: round-robin in battery order, every arm on exactly one shard, and the merge's inverse finds each arm's place", () => {
  const shards = [1, 2, 3].map((index) => armsOfShard(battery, { index, count: 3 }));
  assert.equal(shards.map((s) => [...s].map((key) => key.split("\u0000")[1])), [["a", "d"], ["b", "e"], ["c"]]);
  assert.equal(battery.map((arm) => shards.filter((s) => s.has(armKey(arm))).length), [1, 1, 1, 1, 1]);
  // The same inputs give the same deal on every box.
  assert.equal([...armsOfShard(battery, { index: 2, count: 3 })], [...shards[1]]);
  assert.is(positionInBattery({ index: 2, count: 3 }, 1), 4);
});

test("--shard takes i/n with 1 ≤ i ≤ n, and names the fix otherwise", () => {
  assert.equal(parseShard("2/4"), { index: 2, count: 4 });
  for (const bad of ["0/2", "3/2", "2", "1/0", "a/b"]) assert.throws(() => parseShard(bad), /expected i\/n with 1 ≤ i ≤ n/);
  const cli = bench(["run", "--suite", "traced-reference", "--shard", "3/2"]);
  assert.is(cli.status, 2);
  assert.match(cli.stderr, /--shard <i\/n>.*expected i\/n with 1 ≤ i ≤ n/);
});

test("a shard dealt no arm runs nothing, says so, and exits 77 (nothing was tested on that box)", () => {
  const work = temporaryDirectory("shard");
  try {
    const run = bench(["run", "--suite", "traced-reference", "--shard", "2/2", "--runs-dir", work.path, "--run-id", "empty"]);
    assert.is(run.status, 77, run.stdout + run.stderr);
    assert.match(run.stdout, /shard 2\/2: no arm of 1 arms/);
    const summary = JSON.parse(readFileSync(join(work.path, "empty", "summary.json"), "utf8"));
    assert.equal(summary.selection.shard, { index: 2, count: 2, dealt: [] });
    assert.equal(summary.suites.map((s: { name: string }) => s.name), ["traced-reference"]);
    assert.is(summary.verdicts.length, 0);
  } finally {
    work.remove();
  }
});

test.run();
