// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { admissionsThisStep } from "../server/engine.js";

test("a step admits every queued request that fits while nothing decodes, and one at a time beside decoding slots", () => {
  assert.is(admissionsThisStep(4, 3, false), 3, "an idle engine takes all that arrived together");
  assert.is(admissionsThisStep(2, 5, false), 2, "no more than the idle slots");
  assert.is(admissionsThisStep(3, 3, true), 1, "beside decoding slots, one prompt per step");
  assert.is(admissionsThisStep(0, 3, true), 0, "no idle slot");
  assert.is(admissionsThisStep(3, 0, true), 0, "nothing queued");
});

test.run();
