import { test } from "uvu";
import * as assert from "uvu/assert";
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { BenchError } from "../harness/errors.js";
import { resolveModel } from "../harness/fixtures/registry.js";
import { oracleSettings } from "../harness/oracle/llamacpp-oracle.js";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { loadParitySuite, loadSuite } from "../harness/suites/load.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("long-context");
test.after(() => work.remove());

/** A one-arm parity suite beside a text file, its first prompt cut from the file as `entry` says. */
function suiteWithPrompt(name: string, entry: unknown): string {
  writeFileSync(join(work.path, "text.txt"), "abcdefghij".repeat(10));
  const path = join(work.path, `${name}.json`);
  writeFileSync(path, JSON.stringify({
    name, kind: "parity", oracle: { model: "tiny-random:F32" }, prompts: [entry, "plain"], max_tokens: 4, top_k: 5, band_mnats: 500,
    checks: { greedy_parity: "required" }, arms: [{ label: "F32", model: "tiny-random:F32", gate: "required" }],
  }));
  return path;
}

const refusal = (path: string): BenchError => {
  try {
    loadSuite(path);
  } catch (error) {
    if (error instanceof BenchError) return error;
    throw error;
  }
  throw new Error(`${path} loaded`);
};

test("a parity prompt may be a stretch of a text file beside the suite; a stretch the file does not hold is refused, naming the field", () => {
  const suite = loadParitySuite(suiteWithPrompt("cut", { file: "text.txt", from: 3, chars: 12 }));
  assert.equal(suite.prompts, ["defghijabcde", "plain"]);
  const tooLong = refusal(suiteWithPrompt("too-long", { file: "text.txt", from: 95, chars: 10 }));
  assert.match(tooLong.message, "holds 100 characters");
  assert.is(tooLong.field, "prompts.0.chars");
  assert.is(refusal(suiteWithPrompt("missing", { file: "nowhere.txt", chars: 10 })).field, "prompts.0.file");
});

test("zoo-4k's prompts reach L = 4000: 3,952 tokens with BOS and 48 generated, and the oracle's context holds them", () => {
  const suite = loadParitySuite("zoo-4k");
  assert.is(suite.prompts.length, 2);
  for (const prompt of suite.prompts) assert.is([...prompt].length, 3950);
  assert.is(suite.max_tokens, 48);
  assert.is(oracleSettings(3952 + 48).contextSize, 4032);
  assert.is(oracleSettings(300).contextSize, 1024, "a short suite keeps the recipe's 1,024 cells");
  for (const name of ["zoo-4k-chunks", "zoo-4k-reference"]) assert.equal(loadParitySuite(name).prompts, suite.prompts, `${name} asks zoo-4k's prompts`);
});

test("the committed zoo-4k goldens verify: their oracle settings are the recipe's for 4,000 tokens and the oracle's tokenizer still gives their ids", () => {
  const verified = bench(["goldens", "verify", "goldens/qwen35-tiny.F32/zoo-4k", "goldens/gemma4-tiny.F32/zoo-4k"]);
  assert.is(verified.status, 0, verified.stdout + verified.stderr);
});

test("a clean family passes at L = 4000 through our server prefilling 64 tokens at a time", () => {
  const run = bench(["run", "--suite", "zoo-4k-chunks", "--arm", "qwen35 server F32 chunk 64", "--prompt", "0", "--runs-dir", join(work.path, "runs")]);
  assert.is(run.status, 0, run.stdout + run.stderr);
  assert.match(run.stdout, /greedy_parity\s+required\s+PASS/);
});

test("FAULT state_reset and kv_wrap change a long prompt's next-token distribution in the reference, and only where they apply", async () => {
  const qwen35 = (await resolveModel("qwen35-tiny:F32")).path;
  const gemma4 = (await resolveModel("gemma4-tiny:F32")).path;
  // The runner in Python, as the runner protocol's arm would run it, on a 300-token stretch of prose.
  const script = `
import sys, numpy as np
sys.path.insert(0, ${JSON.stringify(join(PACKAGE_ROOT, "harness", "oracle", "float64"))})
from reference import gemma4, qwen35
from reference.gguf import GgufError, GgufFile
from reference.runner import ReferenceRunner
from reference.sized_faults import FaultedGgufFile
families = {"qwen35": qwen35, "gemma4": gemma4}
text = open(${JSON.stringify(join(PACKAGE_ROOT, "suites", "corpora", "prose.txt"))}).read()[:300]
def last(path, faults):
    gguf = FaultedGgufFile(path, faults) if faults else GgufFile(path)
    family = families[gguf.architecture].Family(gguf, set(), {"gelu": "exact"})
    try:
        if faults: gguf.check_touched(family.new_state(None))
    except GgufError as error:
        return "refused"
    runner = ReferenceRunner(gguf, family, [], faults)
    return runner.prefill(runner.tokenize({"texts": [text]})["ids"][0])[1]
for path in sys.argv[1:]:
    clean = last(path, {})
    for faults in ({"state_reset": 64}, {"kv_wrap": 100}, {"kv_wrap": 400}):
        faulted = last(path, faults)
        print(path.split("/")[-1].split(".")[0], list(faults.items())[0], faulted if isinstance(faulted, str) else float(np.max(np.abs(faulted - clean))))
`;
  const child = spawnSync("python3", ["-c", script, qwen35, gemma4], { encoding: "utf8" });
  assert.is(child.status, 0, child.stderr);
  const moved = new Map<string, string>(child.stdout.trim().split("\n").map((line) => {
    const [model, fault, value] = line.split(/ (?=\(|[\d.er-]+$|refused$)/);
    return [`${model} ${fault}`, value];
  }));
  const shift = (key: string) => Number(moved.get(key));
  assert.ok(shift("qwen35-tiny ('state_reset', 64)") > 1e-3, child.stdout);
  assert.ok(shift("qwen35-tiny ('kv_wrap', 100)") > 1e-3, child.stdout);
  assert.is(shift("qwen35-tiny ('kv_wrap', 400)"), 0, "a cache of more cells than the prompt holds wraps nothing");
  assert.is(moved.get("gemma4-tiny ('state_reset', 64)"), "refused", "gemma4 has no recurrent state to reset");
  assert.ok(shift("gemma4-tiny ('kv_wrap', 100)") > 1e-3, child.stdout);
});

test.run();
