#!/usr/bin/env node
// Runs the uvu suites compiled into dist/test (or the directory given first) and ends with the
// plain line CI reads: "N passed, N failed, N skipped", summed over every file.
// Usage: node scripts/run-tests.js [dir] [--tier fast] [--jobs N] [--timings] [--durations FILE] [--cpu-variant NAME] [uvu flags]
//   --tier fast  only the files whose first lines carry the marker `// test-tier: fast`; every other
//                file (marked or not) runs only in the default, full run, so nothing is ever dropped
//                from `npm test` by forgetting a marker.
//   --jobs N     how many test files run at once, each in its own uvu process (default: the CPU
//                count, or BENCH_TEST_JOBS). A file whose leading comments say `// test-serial: REASON`
//                runs with nothing else beside it (timing-sensitive checks).
//   --cpu-variant NAME  llama.cpp computes with this ggml CPU library in every test (as bench's
//                --cpu-variant; default BENCH_CPU_VARIANT, else the one ggml picks).
//   --timings    every file's wall time at the end (by default, the ten slowest).
//   --durations FILE  measured wall times ({ "NAME.test.js": ms }) for files this checkout has not timed
//                yet (default: test/durations.json, committed, when running dist/test).
// Files start longest first, by the wall times the last run recorded (.timings.json beside the
// compiled tests), else by the committed durations (a fresh clone or CI has no last run), and a file
// timed by neither counts as the slowest, so one long file does not start last and leave the other
// cores idle at the end.
import { spawn } from "node:child_process";
import { availableParallelism } from "node:os";
import { readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const TEST_FILE = /\.test\.js$/;
const KNOWN_TIERS = new Set(["fast"]);
// Only a comment line before the first import counts, so a test that mentions the marker in a
// string (ours does) is never classified by it. Anything there that looks like a marker but is not
// spelt exactly is an error in every run, so a typo cannot quietly drop a file from its tier.
const TIER_MARKER = /^\/\/ test-tier: (\S+)$/;
const LOOKS_LIKE_MARKER = /test.?tier/i;
const SERIAL_MARKER = /^\/\/ test-serial: \S/;
const LOOKS_LIKE_SERIAL = /test.?serial/i;

const uvu = fileURLToPath(new URL("../node_modules/uvu/bin.js", import.meta.url));
const args = process.argv.slice(2);
const givenDir = args[0] !== undefined && !args[0].startsWith("-");
const dir = givenDir ? args.shift() : "dist/test";
const allTimings = takeFlag("--timings");
const durationsFile = takeOption("--durations", (value) => value !== "", "a file of measured wall times") ?? (givenDir ? undefined : fileURLToPath(new URL("../test/durations.json", import.meta.url)));
const tier = takeOption("--tier", (value) => KNOWN_TIERS.has(value), `one of: ${[...KNOWN_TIERS].join(", ")}`);
const jobs = Number(takeOption("--jobs", (value) => /^[1-9]\d*$/.test(value), "a whole number ≥ 1") ?? process.env.BENCH_TEST_JOBS ?? availableParallelism());
if (!Number.isInteger(jobs) || jobs < 1) fail(`BENCH_TEST_JOBS needs a whole number ≥ 1 (got ${process.env.BENCH_TEST_JOBS})`);
const cpuVariant = takeOption("--cpu-variant", (value) => value !== "", "a ggml CPU variant name (bench cpu-variants lists them)") ?? process.env.BENCH_CPU_VARIANT;
if (cpuVariant) {
  // Every test file's process, and every bench and server they start, computes under this variant.
  const { forceCpuVariant } = await import("../dist/harness/cpu/forced-variant.js");
  try {
    forceCpuVariant(cpuVariant);
  } catch (error) {
    fail(error.message);
  }
  console.log(`run-tests: llama.cpp runs the ggml CPU variant ${cpuVariant} in every test`);
}
const uvuFlags = args;
const TIMINGS_FILE = join(dir, ".timings.json");

function takeFlag(name) {
  const at = args.indexOf(name);
  if (at === -1) return false;
  args.splice(at, 1);
  return true;
}

function takeOption(name, valid, expected) {
  const at = args.indexOf(name);
  if (at === -1) return undefined;
  const value = args[at + 1];
  args.splice(at, 2);
  if (value === undefined || !valid(value)) fail(`${name} needs ${expected} (got ${value ?? "nothing"})`);
  return value;
}

function fail(reason) {
  console.log(`run-tests: ${reason}`);
  console.log("0 passed, 1 failed, 0 skipped");
  process.exit(1);
}

/** What a compiled test file's leading comment block declares: its tier (or undefined: full run only) and whether it must run alone. */
function declarations(path) {
  let fileTier;
  let serial = false;
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (!line.startsWith("//")) break;
    if (LOOKS_LIKE_SERIAL.test(line)) {
      if (!SERIAL_MARKER.test(line)) fail(`${path}: malformed serial line "${line.trim()}" (write it as "// test-serial: why it must run alone")`);
      serial = true;
    } else if (LOOKS_LIKE_MARKER.test(line)) {
      const marker = TIER_MARKER.exec(line.trimEnd());
      if (marker === null || !KNOWN_TIERS.has(marker[1])) fail(`${path}: unknown test tier line "${line.trim()}" (write it as "// test-tier: ${[...KNOWN_TIERS].join("|")}")`);
      fileTier = marker[1];
    }
  }
  return { tier: fileTier, serial };
}

const allNames = readdirSync(dir, { recursive: true }).map(String).filter((name) => TEST_FILE.test(name)).sort();

/** The files to run, each with its declarations: every test file, or (for a tier) exactly the files that declare it. */
function chosenFiles() {
  const files = allNames.map((name) => ({ name, ...declarations(join(dir, name)) }));
  if (tier === undefined) return files;
  const chosen = files.filter((file) => file.tier === tier);
  if (chosen.length === 0) fail(`no test file in ${dir} declares "// test-tier: ${tier}"`);
  console.log(`tier ${tier}: ${chosen.length} of ${allNames.length} test files (${chosen.map((file) => file.name).join(", ")})`);
  return chosen;
}

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

function stripColour(text) {
  return text.replace(/\u001b\[[0-9;]*m/g, "");
}

function recordedTimings() {
  try {
    return JSON.parse(readFileSync(TIMINGS_FILE, "utf8"));
  } catch {
    return {}; // first run, or a file from another layout: every file counts as never timed
  }
}

/** The committed measured wall times, for the files the last run did not time (a --durations file that cannot be read is an error: the order would silently fall back). */
function committedDurations() {
  if (durationsFile === undefined) return {};
  try {
    return JSON.parse(readFileSync(durationsFile, "utf8"));
  } catch (error) {
    fail(`--durations ${durationsFile}: ${error.message} (fix: name a JSON file of { "NAME.test.js": milliseconds }, e.g. a copy of dist/test/.timings.json)`);
  }
}

/** The times of this run's files, over the last recorded times of the files that still exist (a fast run keeps the others'). */
function saveTimings(previous, results, names) {
  const next = Object.fromEntries(Object.entries(previous).filter(([name]) => names.has(name)));
  for (const result of results) next[result.name] = Math.round(result.wallMs);
  const temporary = `${TIMINGS_FILE}.tmp-${process.pid}`;
  writeFileSync(temporary, `${JSON.stringify(next, null, 1)}\n`);
  renameSync(temporary, TIMINGS_FILE);
}

/**
 * One file in its own uvu process. A file that passed is one line; a failing file's whole output is
 * printed when it ends, so files running side by side never interleave.
 */
function runFile(file) {
  const startedMs = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [uvu, dir, `^${escapeRegExp(file.name)}$`, ...uvuFlags], { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk) => { output += chunk; });
    child.stderr.on("data", (chunk) => { output += chunk; });
    child.on("close", (code, signal) => {
      const plain = stripColour(output);
      const number = (label) => Number(new RegExp(`^\\s*${label}:\\s+(\\d+)`, "m").exec(plain)?.[1] ?? NaN);
      // uvu's Total counts the tests that ran (skipped ones are not in it); Passed, those that passed.
      const total = number("Total");
      const passed = number("Passed");
      const skipped = number("Skipped") || 0;
      const counted = Number.isFinite(total) && Number.isFinite(passed) && total + skipped > 0;
      // uvu exiting non-zero is a failure even when its counts say none (a hook or a file that threw).
      const failed = !counted ? 1 : code === 0 ? total - passed : Math.max(1, total - passed);
      const wallMs = performance.now() - startedMs;
      if (failed > 0) process.stdout.write(output.endsWith("\n") ? output : `${output}\n`);
      if (!counted) console.log(`run-tests: ${file.name} printed no test totals (uvu exited ${code ?? signal})`);
      console.log(`${failed > 0 ? "FAIL" : "ok  "} ${file.name}: ${counted ? passed : 0} passed, ${failed} failed, ${counted ? skipped : 0} skipped (${(wallMs / 1000).toFixed(1)} s)`);
      resolve({ name: file.name, passed: counted ? passed : 0, failed, skipped: counted ? skipped : 0, wallMs, failures: failed > 0 ? failedTests(plain, code ?? signal) : [] });
    });
  });
}

/**
 * Each failed test of a file's uvu output as `"NAME": first line of its message`, so the end of a
 * long log still says what failed (CI shows its tail); a file that failed outside any test says so.
 */
function failedTests(plain, exit) {
  const failures = [];
  const lines = plain.split("\n");
  lines.forEach((line, at) => {
    const name = /^\s*FAIL\s+"(.*)"\s*$/.exec(line)?.[1];
    if (name === undefined) return;
    const message = lines.slice(at + 1).find((next) => next.trim() !== "")?.trim() ?? "";
    failures.push(`"${name}": ${message.length > 300 ? `${message.slice(0, 300)}…` : message}`);
  });
  return failures.length > 0 ? failures : [`no test failed by name (uvu exited ${exit}): a hook or the file itself threw`];
}

/**
 * Runs every file, at most `jobs` at once, longest first; a serial file waits until nothing else
 * runs and holds every slot while it runs.
 */
async function runAll(files, previous, committed) {
  const expected = (file) => previous[file.name] ?? committed[file.name] ?? Number.POSITIVE_INFINITY;
  const queue = [...files].sort((a, b) => expected(b) - expected(a) || a.name.localeCompare(b.name));
  const results = [];
  let running = 0;
  let serialRunning = false;
  await new Promise((resolveAll) => {
    const startMore = () => {
      if (queue.length === 0 && running === 0) return resolveAll();
      while (queue.length > 0 && !serialRunning && running < jobs) {
        const at = queue.findIndex((file) => !file.serial || running === 0);
        if (at === -1) return; // a serial file is next in line for every slot: wait for the others to end
        const [file] = queue.splice(at, 1);
        running++;
        serialRunning = file.serial;
        runFile(file).then((result) => {
          results.push(result);
          running--;
          if (file.serial) serialRunning = false;
          startMore();
        });
        if (file.serial) return;
      }
    };
    startMore();
  });
  return results;
}

function printTimings(results, totalMs) {
  const shown = allTimings ? [...results].sort((a, b) => a.name.localeCompare(b.name)) : [...results].sort((a, b) => b.wallMs - a.wallMs).slice(0, 10);
  const seconds = (ms) => (ms / 1000).toFixed(1).padStart(7);
  const summed = results.reduce((sum, result) => sum + result.wallMs, 0);
  console.log(`${allTimings ? "Every file" : "Slowest files"} (wall s): ${results.length} files, ${jobs} at a time, ${seconds(summed).trim()} s summed, all of it ${seconds(totalMs).trim()} s`);
  for (const result of shown) console.log(`${seconds(result.wallMs)}  ${result.name}`);
}

const files = chosenFiles();
const previous = recordedTimings();
const startedMs = performance.now();
const results = await runAll(files, previous, committedDurations());
printTimings(results, performance.now() - startedMs);
saveTimings(previous, results, new Set(allNames));
const sum = (key) => results.reduce((total, result) => total + result[key], 0);
const failed = sum("failed");
for (const result of results) for (const failure of result.failures) console.log(`FAILED ${result.name} › ${failure}`);
console.log(`${sum("passed")} passed, ${failed} failed, ${sum("skipped")} skipped`);
process.exit(failed === 0 ? 0 : 1);
