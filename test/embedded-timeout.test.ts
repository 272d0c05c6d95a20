import { test } from "uvu";
import * as assert from "uvu/assert";
import { resolveModel } from "../harness/fixtures/registry.js";
import { LlamaCppSut, ORACLE_SETTINGS } from "../harness/sut/llamacpp.js";
import { SutTimeoutError, withCaseTimeout } from "../harness/sut/with-timeout.js";

// The embedded SUT after a per-case timeout: the abandoned call used to keep decoding on sequence 0
// beside the next case (a wrong next answer, then llama.cpp's "inconsistent sequence positions" and
// an uncaught "Eval has failed" that ended the process). The timeout now abandons the call, which
// stops at its next decode step, and the next case starts only after it.

test("after a greedy call times out, the next greedy and teacher-forced calls on the same context answer as on a fresh one", async () => {
  const sut = await LlamaCppSut.open((await resolveModel("tiny-random:F32")).path, ORACLE_SETTINGS, "embedded");
  try {
    const [long, short] = await sut.tokenize(["The quick brown fox jumps over the lazy dog.", "Zebras graze on the open plain."]);
    const clean = (await sut.greedy([{ promptIds: short, maxTokens: 16 }]))[0];
    const cleanTopK = (await sut.teacherForcedTopK([{ promptIds: short, continuationIds: clean, k: 4 }]))[0];
    // 900 tokens cannot be decoded in 50 ms: the call is abandoned mid-way, every time.
    const hurried = withCaseTimeout(sut, { seconds: 0.05 });
    const patient = withCaseTimeout(sut, { seconds: 60 });
    for (let round = 0; round < 2; round++) {
      const error = await hurried.greedy!([{ promptIds: long, maxTokens: 900 }]).then(() => undefined, (e: unknown) => e);
      assert.ok(error instanceof SutTimeoutError, String(error));
      assert.equal((await patient.greedy!([{ promptIds: short, maxTokens: 16 }]))[0], clean, `round ${round}: greedy after the timeout`);
      await hurried.greedy!([{ promptIds: long, maxTokens: 900 }]).catch(() => undefined);
      assert.equal((await patient.teacherForcedTopK!([{ promptIds: short, continuationIds: clean, k: 4 }]))[0], cleanTopK, `round ${round}: teacher forcing after the timeout`);
    }
    // A call made after the timeout is not abandoned with the one it replaced.
    assert.equal((await sut.batchedGreedy([{ promptIds: short, maxTokens: 16 }]))[0], clean);
  } finally {
    await sut.close();
  }
});

test.run();
