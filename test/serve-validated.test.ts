/**
 * `bench serve` serves what was validated, for any model: which battery validates a model is
 * configuration (box/batteries.json for the fixtures, `batteries` in bench.config.json for a team's
 * models), a refusal names a command that can pass, and a later failing run revokes.
 */
import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { httpCall } from "../harness/sut/http-call.js";
import { SUITES_DIR } from "../harness/paths.js";
import { validationBattery, validationFix } from "../harness/box/batteries.js";
import { DEFAULT_BATTERY } from "../harness/suites/default-battery.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";
import { startBenchServe, waitHealthy } from "./helpers/bench-serve.js";

const work = temporaryDirectory("serve-validated");
test.after(() => work.remove());
const runs = join(work.path, "runs");

test("the shipped batteries: the default battery validates tiny-random and copy-4k, the families' battery (zoo) each family's fixture; an unconfigured model has none", () => {
  for (const model of ["tiny-random", "tiny-random:F32", "copy-4k"]) {
    const battery = validationBattery(model);
    assert.equal(battery?.suites.map((s) => s.name), [...DEFAULT_BATTERY], `${model}: box/batteries.json names the default battery`);
    assert.is(battery?.command, "bench run");
    assert.is(battery?.gatesTheModel, true, model);
  }
  for (const model of ["qwen35-tiny:F32", "qwen35moe-tiny", "gemma4-tiny:f32", "nemotron-h-moe-tiny:F32"]) {
    const battery = validationBattery(model);
    assert.equal(battery?.suites.map((s) => s.name), ["zoo"], model);
    assert.is(battery?.command, "bench run --suite zoo");
    assert.is(battery?.gatesTheModel, true, `${model}: the zoo has a required arm on it`);
    assert.match(validationFix(battery), /^validate it with `bench run --suite zoo`$/);
  }
  assert.is(validationBattery("tiny-random:Q4_K"), undefined);
  assert.is(validationBattery("qwen35-tiny:Q8_0"), undefined, "the zoo holds quantized files informational: it cannot validate them");
  assert.match(validationFix(undefined), /bench\.config\.json "batteries" \(docs\/serving-validated\.md\)/);
});

test("a team's battery in bench.config.json: refused with a fix that names a command that passes; served after that command; refused again after a failing run", async () => {
  // The team's battery: the families' suite cut to its qwen35 embedded arm, held to the zoo's goldens.
  const zoo = JSON.parse(readFileSync(join(SUITES_DIR, "zoo.json"), "utf8"));
  const suitePath = join(work.path, "team-zoo.json");
  writeFileSync(suitePath, JSON.stringify({ ...zoo, $schema: undefined, name: "team-zoo", goldens_of: "zoo", arms: zoo.arms.filter((arm: { label: string }) => arm.label === "qwen35 F32") }));
  const config = join(work.path, "bench.config.json");
  writeFileSync(config, JSON.stringify({ batteries: [{ models: ["qwen35-tiny:F32"], suites: ["team-zoo.json"], why: "FAKE team battery" }] }));
  const serveArgs = ["serve", "--model", "qwen35-tiny:F32", "--config", config, "--runs-dir", runs, "--port", "0"];

  const before = bench(serveArgs);
  assert.is(before.status, 2, before.stdout + before.stderr);
  const fix = /refusing to serve an unvalidated build: no run in .* tested this artifact .*\(fix: validate it with `([^`]+)`, or pass --unvalidated\)$/m.exec(before.stderr);
  assert.ok(fix !== null, before.stderr);
  assert.is(fix[1], `bench run --suite ${suitePath}`);

  const [, ...fixArgs] = fix[1].split(" ");
  const validating = bench([...fixArgs, "--runs-dir", runs, "--run-id", "team-battery"]);
  assert.is(validating.status, 0, validating.stdout + validating.stderr);
  const server = await startBenchServe(runs, ["--model", "qwen35-tiny:F32", "--config", config]);
  try {
    await waitHealthy(server.url);
    const model = JSON.parse((await httpCall(`${server.url}/v1/models`)).text).data[0];
    assert.is(model.validated, true);
    assert.is(model.validation_run, "team-battery");
  } finally {
    server.child.kill("SIGTERM");
    assert.is(await server.exited, 0);
  }

  // A later run that fails a required gate on the same artifact (our server with poisoned slots) revokes.
  const prompts = ["--prompt", "0", "--prompt", "1", "--prompt", "2", "--prompt", "3"];
  const poisoned = bench(["run", "--suite", "zoo", "--arm", "qwen35 server F32", ...prompts, "--runs-dir", runs, "--run-id", "poisoned"], { BENCH_SERVER_FAULT: "skip-slot-clear" });
  assert.is(poisoned.status, 1, poisoned.stdout + poisoned.stderr);
  const after = bench(serveArgs);
  assert.is(after.status, 2, after.stdout + after.stderr);
  assert.match(after.stderr, /refusing to serve an unvalidated build: run poisoned failed zoo\/qwen35 server F32\/\w+ on it .*a failing run revokes any earlier validation \(fix: validate it with `bench run --suite /);
});

test("a battery entry that breaks the schema is refused naming bench.config.json and the field", () => {
  const config = join(work.path, "broken.config.json");
  writeFileSync(config, JSON.stringify({ batteries: [{ models: ["qwen35-tiny:F32"] }] }));
  const result = bench(["serve", "--model", "qwen35-tiny:F32", "--config", config, "--runs-dir", runs, "--port", "0"]);
  assert.is(result.status, 2, result.stdout + result.stderr);
  assert.match(result.stderr, /broken\.config\.json: batteries\.0\.suites: required field is missing/);
});

test.run();
