import { test } from "uvu";
import * as assert from "uvu/assert";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { pathToFileURL } from "node:url";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { temporaryDirectory, withoutForceColor } from "./helpers/workspace.js";

// scripts/run-tests.js's closing line is what CI and people read: a failure must never print as 0 failed.
const work = temporaryDirectory("run-tests-script");
test.after(() => work.remove());

/** A directory of synthetic uvu test files, run by scripts/run-tests.js the way `npm test` runs ours. */
function runSynthetic(name: string, body: string): { status: number | null; lastLine: string } {
  const dir = join(work.path, name);
  mkdirSync(dir);
  writeFileSync(join(dir, "package.json"), '{ "type": "module" }\n');
  const uvu = JSON.stringify(pathToFileURL(join(PACKAGE_ROOT, "node_modules", "uvu", "dist", "index.mjs")).href);
  writeFileSync(join(dir, "synthetic.test.js"), `import { test } from ${uvu};\n${body}\ntest.run();\n`);
  const result = spawnSync(process.execPath, [join(PACKAGE_ROOT, "scripts", "run-tests.js"), dir], { cwd: PACKAGE_ROOT, env: withoutForceColor(process.env), encoding: "utf8" });
  return { status: result.status, lastLine: result.stdout.trim().split("\n").pop() ?? "" };
}

test("one passing, one failing and one skipped test: '1 passed, 1 failed, 1 skipped', exit 1", () => {
  const result = runSynthetic("one-fails", `test("passes", () => {});\ntest("fails", () => { throw new Error("planted failure"); });\ntest.skip("skipped", () => {});`);
  assert.is(result.lastLine, "1 passed, 1 failed, 1 skipped");
  assert.is(result.status, 1);
});

test("passing and skipped tests only: exit 0 with 0 failed", () => {
  const result = runSynthetic("all-pass", `test("a", () => {});\ntest("b", () => {});\ntest.skip("skipped", () => {});`);
  assert.is(result.lastLine, "2 passed, 0 failed, 1 skipped");
  assert.is(result.status, 0);
});

test("a test file that throws before its tests run: counted as a failure, never 0 failed", () => {
  const result = runSynthetic("throws", `throw new Error("broken import");`);
  assert.match(result.lastLine, /^0 passed, 1 failed/);
  assert.is(result.status, 1);
});

test.run();
