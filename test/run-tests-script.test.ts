// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { pathToFileURL } from "node:url";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { temporaryDirectory, withoutForceColor } from "./helpers/workspace.js";

// scripts/run-tests.js's closing line is what CI and people read: a failure must never print as 0 failed.
const work = temporaryDirectory("run-tests-script");
test.after(() => work.remove());

/** A directory of synthetic uvu test files (name → body), run by scripts/run-tests.js the way `npm test` runs ours. */
function runFiles(name: string, files: Record<string, string>, flags: string[] = []): { status: number | null; stdout: string; lastLine: string } {
  const dir = join(work.path, name);
  mkdirSync(dir);
  writeFileSync(join(dir, "package.json"), '{ "type": "module" }\n');
  const uvu = JSON.stringify(pathToFileURL(join(PACKAGE_ROOT, "node_modules", "uvu", "dist", "index.mjs")).href);
  for (const [file, body] of Object.entries(files)) writeFileSync(join(dir, file), body.replace("IMPORT_UVU", `import { test } from ${uvu};`));
  const result = spawnSync(process.execPath, [join(PACKAGE_ROOT, "scripts", "run-tests.js"), dir, ...flags], { cwd: PACKAGE_ROOT, env: withoutForceColor(process.env), encoding: "utf8" });
  return { status: result.status, stdout: result.stdout, lastLine: result.stdout.trim().split("\n").pop() ?? "" };
}

function runSynthetic(name: string, body: string): { status: number | null; lastLine: string } {
  return runFiles(name, { "synthetic.test.js": `IMPORT_UVU\n${body}\ntest.run();\n` });
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

test("our fast tier: every marked source file keeps its marker as the compiled file's first line, where the runner reads it", () => {
  const sources = readdirSync(join(PACKAGE_ROOT, "test")).filter((name) => name.endsWith(".test.ts"));
  const marked = sources.filter((name) => readFileSync(join(PACKAGE_ROOT, "test", name), "utf8").startsWith("// test-tier: fast\n"));
  assert.ok(marked.length >= 5 && marked.length < sources.length / 2, `${marked.length} of ${sources.length} files marked fast`);
  for (const name of marked) {
    const compiled = readFileSync(join(PACKAGE_ROOT, "dist", "test", name.replace(/\.ts$/, ".js")), "utf8");
    assert.ok(compiled.startsWith("// test-tier: fast\n"), `dist/test/${name.replace(/\.ts$/, ".js")} lost its marker in compilation`);
  }
});

// Three files: one declares the fast tier, one does not, one mentions the marker only in a string.
const tiered = {
  "a-fast.test.js": `// Parses things.\n// test-tier: fast\nIMPORT_UVU\ntest("fast one", () => {});\ntest.run();\n`,
  "b-full.test.js": `IMPORT_UVU\ntest("full one", () => {});\ntest("full two", () => {});\ntest.run();\n`,
  "c-mentions.test.js": `IMPORT_UVU\nconst marker = "// test-tier: fast";\ntest("mentions the marker", () => { if (marker === "") throw new Error(); });\ntest.run();\n`,
};

test("--tier fast runs exactly the files whose leading comments declare it; the default run runs every file", () => {
  const fast = runFiles("tier-fast", tiered, ["--tier", "fast"]);
  assert.is(fast.lastLine, "1 passed, 0 failed, 0 skipped", fast.stdout);
  assert.match(fast.stdout, /^tier fast: 1 of 3 test files \(a-fast\.test\.js\)$/m);
  assert.is(fast.status, 0);
  const full = runFiles("tier-full", tiered);
  assert.is(full.lastLine, "4 passed, 0 failed, 0 skipped", "an unmarked file is never dropped from the full run");
});

test("a misspelt marker, an unknown tier, or a tier no file declares fails the run instead of running less", () => {
  const unknownMarker = runFiles("tier-typo", { ...tiered, "d-typo.test.js": `// test-tier: fsat\nIMPORT_UVU\ntest("x", () => {});\ntest.run();\n` }, ["--tier", "fast"]);
  assert.match(unknownMarker.stdout, /d-typo\.test\.js: unknown test tier line "\/\/ test-tier: fsat" \(write it as "\/\/ test-tier: fast"\)/);
  assert.is(unknownMarker.lastLine, "0 passed, 1 failed, 0 skipped");
  assert.is(unknownMarker.status, 1);
  const misspeltInFullRun = runFiles("tier-spelling", { ...tiered, "e-spelling.test.js": `// Test tier fast\nIMPORT_UVU\ntest("x", () => {});\ntest.run();\n` });
  assert.match(misspeltInFullRun.stdout, /e-spelling\.test\.js: unknown test tier line "\/\/ Test tier fast"/, "checked in the full run too");
  assert.is(misspeltInFullRun.status, 1);
  const unknownOption = runFiles("tier-option", tiered, ["--tier", "quick"]);
  assert.match(unknownOption.stdout, /--tier needs one of: fast \(got quick\)/);
  assert.is(unknownOption.status, 1);
  const noneDeclared = runFiles("tier-none", { "b-full.test.js": tiered["b-full.test.js"] }, ["--tier", "fast"]);
  assert.match(noneDeclared.stdout, /no test file in .* declares "\/\/ test-tier: fast"/);
  assert.is(noneDeclared.status, 1);
});

test("every file's wall time with --timings (the ten slowest without), before the closing line", () => {
  const sleeper = `IMPORT_UVU\ntest("sleeps", () => new Promise((resolve) => setTimeout(resolve, 300)));\ntest.run();\n`;
  const result = runFiles("timings", { "quick.test.js": `IMPORT_UVU\ntest("q", () => {});\ntest.run();\n`, "sleepy.test.js": sleeper }, ["--timings"]);
  const lines = result.stdout.trim().split("\n");
  const table = lines.slice(lines.findIndex((line) => line.startsWith("Every file (wall s)")));
  assert.match(table[0], /^Every file \(wall s\): 2 files, \d+ at a time, [\d.]+ s summed, all of it [\d.]+ s$/);
  const seconds = (file: string) => Number(new RegExp(`^ *([\\d.]+)  ${file}$`, "m").exec(table.join("\n"))?.[1]);
  assert.ok(seconds("sleepy.test.js") >= 0.3, `the file that sleeps 300 ms: ${seconds("sleepy.test.js")} s`);
  assert.ok(seconds("quick.test.js") >= 0, "the other file is listed too");
  assert.is(table.at(-1), "2 passed, 0 failed, 0 skipped");
});

test("files start longest first: by the last run's times, else by the committed durations; an unreadable --durations fails the run", () => {
  const quick = `IMPORT_UVU\ntest("q", () => {});\ntest.run();\n`;
  const files = { "a.test.js": quick, "b.test.js": quick, "c.test.js": quick };
  const durations = join(work.path, "durations.json");
  writeFileSync(durations, JSON.stringify({ "a.test.js": 10, "b.test.js": 30000, "c.test.js": 2000 }));
  const order = (stdout: string) => [...stdout.matchAll(/^ok {3}(\w)\.test\.js/gm)].map((match) => match[1]).join("");
  // One at a time, so the order they end in is the order they started in.
  const committed = runFiles("durations", files, ["--jobs", "1", "--durations", durations]);
  assert.is(order(committed.stdout), "bca", committed.stdout);
  // The run recorded its own times beside the files: the next run orders by those, not the committed ones.
  const recorded = JSON.parse(readFileSync(join(work.path, "durations", ".timings.json"), "utf8"));
  assert.equal(Object.keys(recorded).sort(), ["a.test.js", "b.test.js", "c.test.js"]);
  const missing = runFiles("durations-missing", files, ["--durations", join(work.path, "no-such.json")]);
  assert.match(missing.stdout, /^run-tests: --durations .*no-such\.json: .*\(fix: name a JSON file of/m);
  assert.is(missing.lastLine, "0 passed, 1 failed, 0 skipped");
});

// Each file of a pair announces itself in a shared directory, then waits for the other's announcement:
// only two files that really run at the same time both pass.
const rendezvous = (me: string, other: string, dir: string) => `IMPORT_UVU
import { existsSync, writeFileSync } from "node:fs";
test("meets ${other}", async () => {
  writeFileSync(${JSON.stringify(join(dir, me))}, "");
  for (let waited = 0; !existsSync(${JSON.stringify(join(dir, other))}); waited += 50) {
    if (waited > 60000) throw new Error("${other} never ran beside me");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
});
test.run();
`;

test("--jobs 2 runs two files at once, each in its own process, and sums their counts", () => {
  const meeting = join(work.path, "meeting");
  mkdirSync(meeting);
  const result = runFiles("parallel", { "a.test.js": rendezvous("a", "b", meeting), "b.test.js": rendezvous("b", "a", meeting), "c.test.js": `IMPORT_UVU\ntest.skip("s", () => {});\ntest("c", () => {});\ntest.run();\n` }, ["--jobs", "2"]);
  assert.is(result.lastLine, "3 passed, 0 failed, 1 skipped", result.stdout);
  assert.is(result.status, 0);
});

test("a file marked test-serial runs with nothing beside it; a malformed serial line fails the run", () => {
  const marks = join(work.path, "serial-marks");
  mkdirSync(marks);
  // Every ordinary file leaves a mark while it runs; the serial file fails if it sees one during its own run.
  const ordinary = (name: string) => `IMPORT_UVU
import { rmSync, writeFileSync } from "node:fs";
test("${name}", async () => {
  writeFileSync(${JSON.stringify(join(marks, name))}, "");
  await new Promise((resolve) => setTimeout(resolve, 200));
  rmSync(${JSON.stringify(join(marks, name))});
});
test.run();
`;
  const serial = `// Times things.
// test-serial: asserts wall times
IMPORT_UVU
import { readdirSync } from "node:fs";
test("alone", async () => {
  for (let i = 0; i < 10; i++) {
    if (readdirSync(${JSON.stringify(marks)}).length > 0) throw new Error("ran beside " + readdirSync(${JSON.stringify(marks)}).join(", "));
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
});
test.run();
`;
  const result = runFiles("serial", { "a.test.js": ordinary("a"), "b.test.js": ordinary("b"), "m.test.js": serial, "y.test.js": ordinary("y"), "z.test.js": ordinary("z") }, ["--jobs", "4"]);
  assert.is(result.lastLine, "5 passed, 0 failed, 0 skipped", result.stdout);
  const malformed = runFiles("serial-malformed", { "m.test.js": `// test-serial\nIMPORT_UVU\ntest("x", () => {});\ntest.run();\n` });
  assert.match(malformed.stdout, /m\.test\.js: malformed serial line "\/\/ test-serial" \(write it as "\/\/ test-serial: why it must run alone"\)/);
  assert.is(malformed.status, 1);
});

test.run();
