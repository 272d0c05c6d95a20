import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { resolveModel } from "../harness/fixtures/registry.js";
import { sha256File } from "../harness/io/sha256.js";
import { describeRun, runInProcess } from "./helpers/in-process-run.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("identity");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const TWO_PROMPTS = ["--prompt", "0", "--prompt", "1"];
/** `bench run --suite parity16 --prompt 0 --prompt 1 ...` in this process (helpers/in-process-run.ts): identity is about the arms, not the CLI. */
const parity16 = (runId: string, options: { arms?: string[]; model?: string; runner?: string }) =>
  runInProcess(runs, runId, { suites: ["parity16"], arms: options.arms, model: options.model, runner: options.runner?.split(" "), prompts: [0, 1] });

interface Verdict { arm: string; check: string; gate: string; status: string; summary?: string; reason?: string }
const verdictsOf = (runId: string): Verdict[] => JSON.parse(readFileSync(join(runs, runId, "summary.json"), "utf8")).verdicts;

test("the server arm pointed at another model (Q8_0, goldens from F32): identity fails on its own, naming both files and hashes", async () => {
  const result = await parity16("server-q8", { arms: ["server F32"], model: "tiny-random:Q8_0" });
  assert.is(result.code, 1, describeRun(result));
  const [f32Path, q8Path] = [(await resolveModel("tiny-random:F32")).path, (await resolveModel("tiny-random:Q8_0")).path];
  const [f32, q8] = await Promise.all([sha256File(f32Path), sha256File(q8Path)]);
  const identity = verdictsOf("server-q8").find((v) => v.check === "identity")!;
  assert.is(identity.gate, "required");
  assert.is(identity.status, "fail");
  assert.is(identity.summary, `server F32 on tiny-random:Q8_0 identity: MISMATCH — the server's /v1/models says it runs ${basename(q8Path)} (sha256 ${q8}); ` +
    `the goldens' model (tiny-random:F32) is ${basename(f32Path)} (sha256 ${f32}): this arm's verdicts are about another artifact`);
});

test("clean arms verify their artifact: embedded (the harness loaded it), server (/v1/models), runner (its hello); a quantized informational arm runs the model it names", async () => {
  const result = await parity16("clean", { arms: ["F32", "server F32", "Q8_0"] });
  assert.is(result.code, 0, describeRun(result));
  const identities = verdictsOf("clean").filter((v) => v.check === "identity");
  assert.equal(identities.map((v) => [v.arm, v.gate, v.status]), [["F32", "required", "pass"], ["server F32", "required", "pass"], ["Q8_0", "informational", "pass"]]);
  assert.match(identities[1].summary!, /per the server's \/v1\/models\), the goldens' artifact$/);
  assert.match(identities[2].summary!, /runs tiny-random\.v\d+\.Q8_0\.gguf .*the model the arm names, held to the goldens of tiny-random:F32$/);
  const runner = await parity16("runner", { runner: "python3 {bench}/harness/oracle/float64/reference_forward.py {model}" });
  assert.is(runner.code, 0, describeRun(runner));
  assert.match(verdictsOf("runner").find((v) => v.check === "identity")!.summary!, /runs tiny-random\.v\d+\.F32\.gguf \(sha256 [0-9a-f]{16}…, per the runner's hello\), the goldens' artifact/);
});

// The real CLI: the line it prints last for a required gate SKIPPED is part of what is tried.
test("a runner that does not say which model it loaded: identity is SKIPPED as unverified, never passed; exit 77", () => {
  const result = bench(["run", "--suite", "parity16", "--runner", "python3 {bench}/test/helpers/fake_runner.py anonymous {model}", ...TWO_PROMPTS, "--runs-dir", runs, "--run-id", "anonymous"]);
  assert.is(result.status, 77, result.stdout + result.stderr);
  const verdicts = verdictsOf("anonymous");
  const identity = verdicts.find((v) => v.check === "identity")!;
  assert.is(identity.status, "skip");
  assert.match(identity.reason!, /^unverified: runner does not say which model file it loaded \(the goldens' model \(tiny-random:F32\) is tiny-random\.v\d+\.F32\.gguf, sha256 [0-9a-f]{64}\); fix: pass model_path=PATH to bench_runner\.serve\(\.\.\.\) \(it hashes the file into the hello\), or send model_sha256 and model_file in the hello yourself$/);
  assert.match(result.stdout, /SKIPPED — NOT A PASS: parity16 \/ runner \/ identity: unverified: .*fix: pass model_path=PATH to bench_runner\.serve/, "the run's last lines name the fix");
  // An empty list would pass `every`: parity must be among the gates that ran.
  const others = verdicts.filter((v) => v.check !== "identity");
  assert.ok(others.some((v) => v.check === "greedy_parity") && others.every((v) => v.status === "pass"), `every other gate ran and passed: ${JSON.stringify(others.map((v) => [v.check, v.status]))}`);
});

test.run();
