// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { readGoldens } from "../harness/goldens/goldens.js";
import { goldensDir } from "../harness/goldens/goldens.js";
import { distribution } from "../harness/stats/distribution.js";
import { temporaryDirectory } from "./helpers/workspace.js";
import { assertFixturesMatchPins, type FixturePins } from "./helpers/fixture-pins.js";

const work = temporaryDirectory("fixtures");
test.after(() => work.remove());

/** Pinned: the fixtures are byte-identical on every machine. A change here is a fixture change (bump FIXTURE_BUILDER_VERSION). */
const PINNED_SHA256: FixturePins[string] = {
  F32: "9723a8010ce140853a3f652b4f1f27b123c8832aeee870bec9e964d7c40d3c14",
  Q8_0: "243c7b4b3839b50031351be766613f82b64cb3cbf021306d61838eaeade01002",
  Q4_K: "a22a69f0a3271e7e9c73cb9329f6ec175b6e1849dcf5f2507161d726730e4ab3",
  Q5_K: "94c2ad4aadcd812b0553e6e3c99651c584ddea6fcac2445641942a516053edfb",
  Q6_K: "edc6e7614b81f449876953d2f6bccc2b7bfa2a5689da6477eabb9f9c8c3e00ec",
};

test("tiny-random variants built in a fresh cache match their pinned sha256", async () => {
  await assertFixturesMatchPins({ "tiny-random": PINNED_SHA256 }, work.path);
});

test("next-token distributions are peaked enough for greedy decoding to mean something", () => {
  const goldens = readGoldens(goldensDir("tiny-random.F32", "parity16"));
  const margins = goldens.topkLogprobs!.flat().map((row) => row[0] - row[1]);
  const stats = distribution(margins)!;
  // Measured on the committed goldens: median top-1/top-2 margin 3.40 nats, p10 0.70, median top-1 probability 0.956 (docs/fixtures.md).
  assert.ok(stats.median > 1.5, `median margin ${stats.median} nats`);
  assert.ok(stats.p10 > 0.2, `p10 margin ${stats.p10} nats`);
  const topProbability = distribution(goldens.topkLogprobs!.flat().map((row) => Math.exp(row[0])))!;
  assert.ok(topProbability.median > 0.6, `median top-1 probability ${topProbability.median}`);
});

test.run();
