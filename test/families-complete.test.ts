// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { MODEL_FAMILIES, type ModelFamily } from "../harness/families/registry.js";
import { goldensDir } from "../harness/goldens/goldens.js";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { loadParitySuite } from "../harness/suites/load.js";

// A family is found from its entry in harness/families/registry.ts: this test names each part a
// family lacks, and each part that belongs to no family.

const FLOAT64_ORACLE = join(PACKAGE_ROOT, "harness", "oracle", "float64");

/** The float64 reference's view of the families: its module per architecture, and the FAULTs each takes beyond the output-head scalings every family takes. */
function pythonFamilies(): Record<string, { module: string; faults: string[] }> {
  const script = [
    "import json, os, reference_forward as r",
    "from reference.head_faults import HEAD_SCALE",
    "print(json.dumps({a: {'module': os.path.basename(m.__file__), 'faults': sorted(set(m.faults_for(a)) - set(HEAD_SCALE))} for a, m in r.FAMILIES.items()}))",
  ].join("\n");
  const result = spawnSync("python3", ["-c", script], { cwd: FLOAT64_ORACLE, encoding: "utf8" });
  assert.is(result.status, 0, `python3 could not read reference_forward.FAMILIES: ${result.stderr}`);
  return JSON.parse(result.stdout);
}
const python = pythonFamilies();

const cleanFixtures = (family: ModelFamily) => family.fixtures.filter((fixture) => fixture.fault === undefined);

test("every family's fixtures build models of its architecture, a clean one first", () => {
  for (const family of MODEL_FAMILIES) {
    assert.ok(cleanFixtures(family).length > 0, `${family.architecture}: no clean fixture`);
    assert.is(family.fixtures[0].fault, undefined, `${family.architecture}: its first fixture (the one its suite holds to goldens) carries a fault`);
    for (const fixture of family.fixtures) assert.is(fixture.build().architecture, family.architecture, `${fixture.name}: builds another architecture`);
  }
});

test("every family's first fixture has committed goldens and a required F32 arm in its suite", () => {
  for (const family of MODEL_FAMILIES) {
    const model = `${family.fixtures[0].name}:F32`;
    const suite = loadParitySuite(family.suite);
    assert.ok(existsSync(goldensDir(`${family.fixtures[0].name}.F32`, suite.name)), `${family.architecture}: no goldens/${family.fixtures[0].name}.F32/${suite.name}/ (bench goldens make --suite ${suite.name} --model ${model})`);
    const arms = suite.arms.filter((arm) => arm.model === model && arm.gate === "required");
    assert.ok(arms.length > 0, `${family.architecture}: suites/${family.suite}.json has no required arm on ${model}`);
  }
});

test("every family has its float64 reference module, and the reference knows no family the registry lacks", () => {
  for (const family of MODEL_FAMILIES) {
    assert.ok(existsSync(join(FLOAT64_ORACLE, "reference", family.reference)), `${family.architecture}: harness/oracle/float64/reference/${family.reference} does not exist`);
    assert.is(python[family.architecture]?.module, family.reference, `${family.architecture}: reference_forward.py's FAMILIES does not map it to ${family.reference}`);
  }
  const orphans = Object.keys(python).filter((architecture) => !MODEL_FAMILIES.some((family) => family.architecture === architecture));
  assert.equal(orphans, [], "reference_forward.py's FAMILIES holds architectures with no entry in harness/families/registry.ts");
});

test("every family carries a planted fault of its own: a fixture built with one, or a FAULT of its float64 reference", () => {
  for (const family of MODEL_FAMILIES) {
    const planted = [...family.fixtures.flatMap((fixture) => fixture.fault ?? []), ...(python[family.architecture]?.faults ?? [])];
    assert.ok(planted.length > 0, `${family.architecture}: no planted fault (a fixture with a fault, or a FAULT its reference module's faults_for names)`);
  }
});

test("every Hugging Face exporter (harness/export-hf/families/) is a family's", async () => {
  const exporters = new Set<unknown>(MODEL_FAMILIES.map((family) => family.exportHf));
  const directory = join(PACKAGE_ROOT, "dist", "harness", "export-hf", "families");
  for (const file of readdirSync(directory).filter((name) => name.endsWith(".js"))) {
    const module: Record<string, unknown> = await import(pathToFileURL(join(directory, file)).href);
    for (const [name, value] of Object.entries(module)) {
      if (name.startsWith("export") && typeof value === "function") assert.ok(exporters.has(value), `${file.replace(/\.js$/, ".ts")}: ${name} is no family's exportHf`);
    }
  }
});

test.run();
