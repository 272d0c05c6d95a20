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
  F32: "4c911afc83872536b7cd2ae68c50ac395ab437648533cf425d7a749812730bfe",
  Q8_0: "8e9a835f2c4803929c937cc4b6facc7511076dbd97a9291e7591b083592e8e8a",
  Q4_K: "877b65eb1d1424d24908759b3999d32ee503f71fddd11eb5d4f390b53417fd34",
  Q5_K: "a7eece5e96bee62419de416548f7c6630a1120c758beb072907128da341ea3ff",
  Q6_K: "37e03506035c3cb8fb527526233ac166f205dd8b544c5e443a135988298b0c73",
};

test("tiny-random variants built in a fresh cache match their pinned sha256", async () => {
  await assertFixturesMatchPins({ "tiny-random": PINNED_SHA256 }, work.path);
});

test("next-token distributions are peaked enough for greedy decoding to mean something", () => {
  const goldens = readGoldens(goldensDir("tiny-random.F32", "parity16"));
  const margins = goldens.topkLogprobs!.flat().map((row) => row[0] - row[1]);
  const stats = distribution(margins)!;
  // Measured on the committed goldens: median top-1/top-2 margin 3.38 nats, p10 0.41, median top-1 probability 0.956 (README).
  assert.ok(stats.median > 1.5, `median margin ${stats.median} nats`);
  assert.ok(stats.p10 > 0.2, `p10 margin ${stats.p10} nats`);
  const topProbability = distribution(goldens.topkLogprobs!.flat().map((row) => Math.exp(row[0])))!;
  assert.ok(topProbability.median > 0.6, `median top-1 probability ${topProbability.median}`);
});

test.run();
