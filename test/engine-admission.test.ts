// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { admissionsThisStep } from "../server/engine.js";

test("a step admits one queued request where a slot is idle, busy engine or not", () => {
  assert.is(admissionsThisStep(4, 3), 1, "requests that arrived together are admitted one a step, so that they do not end together again");
  assert.is(admissionsThisStep(1, 5), 1);
  assert.is(admissionsThisStep(0, 3), 0, "no idle slot");
  assert.is(admissionsThisStep(3, 0), 0, "nothing queued");
});

test.run();
