import { test } from "uvu";
import * as assert from "uvu/assert";
import { RestartingRunner, RunnerReplacedError } from "../harness/sut/restarting-runner.js";
import { SutGoneError } from "../harness/sut/sut-gone.js";
import { caseTimeoutOf, withCaseTimeout } from "../harness/sut/with-timeout.js";
import type { GreedyRequest, SystemUnderTest } from "../harness/sut/types.js";

/**
 * FAKE runners (no process: the restart logic alone, in milliseconds). Each answers greedy with its
 * number, except on a request for the prompt id 666, which it never answers (a wedged device call).
 */
function fakeRunner(number: number, sha256 = "a".repeat(64), log: string[] = []): SystemUnderTest {
  return {
    label: "FAKE runner",
    provenance: { kind: "stdio", engine: "FAKE", settings: {}, loadedModel: { sha256, file: "m.gguf", reportedBy: "the runner's hello" } },
    traceDemand: async () => [],
    greedy: (requests: readonly GreedyRequest[]) => requests.some((r) => r.promptIds.includes(666)) ? new Promise<never>(() => undefined) : Promise.resolve(requests.map(() => [number])),
    close: async () => { log.push(`close ${number}`); },
  };
}

const ask = (sut: SystemUnderTest, id: number) => sut.greedy!([{ promptIds: [id], maxTokens: 1 }]);

function restarting(limit: number, fresh: () => SystemUnderTest, log: string[]) {
  return new RestartingRunner(fakeRunner(1, undefined, log), {
    caseTimeout: { seconds: 0.05, suitePath: "suites/FAKE.json" }, limit, signal: new AbortController().signal,
    open: async () => fresh(),
    beforeRestart: async (restart, why) => { log.push(`restart ${restart}: ${why}`); },
  });
}

test("a request that times out is that case's error; the runner is stopped at once, and the next request starts a fresh one (lazily)", async () => {
  const log: string[] = [];
  let started = 1;
  const runner = restarting(2, () => fakeRunner(++started, undefined, log), log);
  assert.equal(await ask(runner.sut, 0), [[1]]);
  const error = await ask(runner.sut, 666).catch((e: unknown) => e);
  assert.instance(error, RunnerReplacedError);
  assert.is((error as Error).message, "FAKE runner: greedy timed out after 0.05 s; the runner was stopped, a fresh runner takes the next case (per-case timeout: raise it with --case-timeout SECONDS or case_timeout_s in suites/FAKE.json)");
  assert.equal(log, ["close 1"], "stopped at the timeout; nothing started until a request needs it");
  assert.is((await runner.sut.traceDemand!().catch((e: unknown) => e) as Error).message, "not asked: the runner was stopped after greedy timed out after 0.05 s (per-case timeout); the graphs it captured went with it");
  assert.equal(log, ["close 1"], "no runner is started only to be asked for the graphs it captured");
  assert.equal(await ask(runner.sut, 0), [[2]], "the next case is answered by the fresh runner");
  assert.equal(log, ["close 1", "restart 1: greedy timed out after 0.05 s (per-case timeout)"]);
  assert.is(runner.restarts, 1);
});

test("past the limit every later request is not run (the SUT is gone); limit 0 replaces nothing", async () => {
  const log: string[] = [];
  let started = 1;
  const runner = restarting(1, () => fakeRunner(++started, undefined, log), log);
  await ask(runner.sut, 666).catch(() => undefined);
  const second = await ask(runner.sut, 666).catch((e: unknown) => e);
  assert.match((second as Error).message, /the runner was stopped, not replaced: restarted 1 times already \(the limit\) \(per-case timeout: raise it with --case-timeout SECONDS or case_timeout_s in suites\/FAKE\.json\)$/);
  const after = await ask(runner.sut, 0).catch((e: unknown) => e);
  assert.instance(after, SutGoneError);
  assert.is((after as Error).message, "not run: runner restarted 1 times (the limit per arm), and the last one's greedy timed out after 0.05 s (per-case timeout)");
  assert.is(runner.restarts, 1);
  const none = restarting(0, () => { throw new Error("must not start"); }, []);
  await ask(none.sut, 666).catch(() => undefined);
  assert.match((await ask(none.sut, 0).catch((e: unknown) => e) as Error).message, /^not run: runner restarted 0 times/);
});

test("a fresh runner that names another model file (or cannot start) is not used: the rest of the arm is not run, with why", async () => {
  const log: string[] = [];
  const runner = restarting(2, () => fakeRunner(2, "b".repeat(64), log), log);
  await ask(runner.sut, 666).catch(() => undefined);
  const error = await ask(runner.sut, 0).catch((e: unknown) => e);
  assert.instance(error, SutGoneError);
  assert.is((error as Error).message, `not run: the restarted runner is not the one this arm's verdicts are about: it says it runs model sha256 ${"b".repeat(64)}, the first said ${"a".repeat(64)}`);
  assert.ok(log.includes("close 2"), "the mismatched runner was stopped");
  const failing = restarting(2, () => { throw new Error("the runner wrote no hello within 1 s"); }, []);
  await ask(failing.sut, 666).catch(() => undefined);
  assert.is((await ask(failing.sut, 0).catch((e: unknown) => e) as Error).message, "not run: the runner could not be restarted (restart 1): the runner wrote no hello within 1 s");
});

test("a timeout a suite file sets names that file as the place to raise it (--case-timeout does not override it); one with no file says the suite's", async () => {
  const timeout = caseTimeoutOf({ case_timeout_s: 0.05, path: "suites/FAKE.json" }, 120);
  const fromSuite = await ask(withCaseTimeout(fakeRunner(1), timeout), 666).catch((e: unknown) => e);
  assert.is((fromSuite as Error).message, "FAKE runner: greedy did not answer within 0.05 s (per-case timeout, set by case_timeout_s in suites/FAKE.json: raise it there, it overrides --case-timeout SECONDS)");
  const unknownFile = await ask(withCaseTimeout(fakeRunner(1), { seconds: 0.05 }), 666).catch((e: unknown) => e);
  assert.is((unknownFile as Error).message, "FAKE runner: greedy did not answer within 0.05 s (per-case timeout: raise it with --case-timeout SECONDS or the suite's case_timeout_s)");
});

test.run();
