import { test } from "uvu";
import * as assert from "uvu/assert";
import { resolveModel } from "../harness/fixtures/registry.js";
import { OnDemandOracle, openLlamaCppOracle } from "../harness/oracle/llamacpp-oracle.js";

test("the on-demand oracle loads nothing until a path must be teacher-forced, then answers as the opened oracle, under the same provenance", async () => {
  const model = await resolveModel("tiny-random:F32");
  const lazy = await OnDemandOracle.open(model);
  const eager = await openLlamaCppOracle(model);
  try {
    assert.equal(lazy.provenance, eager.provenance, "cached oracle rows are keyed by provenance: both must key alike");
    assert.is(lazy.label, eager.label);
    assert.is(lazy.loaded, false);
    const [promptIds] = await eager.tokenize(["The quick brown fox"]);
    const request = { promptIds, continuationIds: (await eager.greedy([{ promptIds, maxTokens: 4 }]))[0], k: 5 };
    const rows = await lazy.teacherForcedTopK([request]);
    assert.is(lazy.loaded, true);
    assert.equal(rows, await eager.teacherForcedTopK([request]));
    assert.is(rows[0].length, 4);
  } finally {
    await lazy.close();
    await eager.close();
  }
});

test.run();
