#!/usr/bin/env node
// Runs the uvu suites compiled into dist/test (or the directory given first) and ends with the
// plain line CI reads: "N passed, N failed, N skipped". uvu prints its own totals; we restate them.
// Usage: node scripts/run-tests.js [dir] [--tier fast] [--timings] [uvu flags]
//   --tier fast  only the files whose first lines carry the marker `// test-tier: fast`; every other
//                file (marked or not) runs only in the default, full run, so nothing is ever dropped
//                from `npm test` by forgetting a marker.
//   --timings    every file's wall time at the end (by default, the ten slowest).
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const TEST_FILE = /\.test\.js$/;
const KNOWN_TIERS = new Set(["fast"]);
// Only a comment line before the first import counts, so a test that mentions the marker in a
// string (ours does) is never classified by it. Anything there that looks like a marker but is not
// spelt exactly is an error in every run, so a typo cannot quietly drop a file from its tier.
const TIER_MARKER = /^\/\/ test-tier: (\S+)$/;
const LOOKS_LIKE_MARKER = /test.?tier/i;

const uvu = fileURLToPath(new URL("../node_modules/uvu/bin.js", import.meta.url));
const args = process.argv.slice(2);
const givenDir = args[0] !== undefined && !args[0].startsWith("-");
const dir = givenDir ? args.shift() : "dist/test";
const allTimings = takeFlag("--timings");
const tier = takeOption("--tier");
const uvuFlags = args;

function takeFlag(name) {
  const at = args.indexOf(name);
  if (at === -1) return false;
  args.splice(at, 1);
  return true;
}

function takeOption(name) {
  const at = args.indexOf(name);
  if (at === -1) return undefined;
  const value = args[at + 1];
  args.splice(at, 2);
  if (value === undefined || !KNOWN_TIERS.has(value)) fail(`${name} needs one of: ${[...KNOWN_TIERS].join(", ")} (got ${value ?? "nothing"})`);
  return value;
}

function fail(reason) {
  console.log(`run-tests: ${reason}`);
  console.log("0 passed, 1 failed, 0 skipped");
  process.exit(1);
}

/** The tier a compiled test file declares in its leading comment block, or undefined (full run only). */
function declaredTier(path) {
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (!line.startsWith("//")) return undefined;
    if (!LOOKS_LIKE_MARKER.test(line)) continue;
    const marker = TIER_MARKER.exec(line.trimEnd());
    if (marker === null || !KNOWN_TIERS.has(marker[1])) fail(`${path}: unknown test tier line "${line.trim()}" (write it as "// test-tier: ${[...KNOWN_TIERS].join("|")}")`);
    return marker[1];
  }
  return undefined;
}

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The uvu file pattern: every test file, or (for a tier) exactly the files that declare it. */
function filePattern() {
  const names = readdirSync(dir, { recursive: true }).map(String).filter((name) => TEST_FILE.test(name));
  const tiers = new Map(names.map((name) => [name, declaredTier(join(dir, name))]));
  if (tier === undefined) return TEST_FILE.source;
  const chosen = names.filter((name) => tiers.get(name) === tier);
  if (chosen.length === 0) fail(`no test file in ${dir} declares "// test-tier: ${tier}"`);
  console.log(`tier ${tier}: ${chosen.length} of ${names.length} test files (${chosen.sort().join(", ")})`);
  return `^(?:${chosen.map(escapeRegExp).join("|")})$`;
}

const pattern = filePattern();
const startedMs = performance.now();
const child = spawn(process.execPath, [uvu, dir, pattern, ...uvuFlags], { stdio: ["ignore", "pipe", "inherit"] });
let output = "";
let partialLine = "";
// uvu prints each file's name on a line of its own as that file's suites start, after it has
// imported every file; the gaps between those lines are the files' wall times.
const fileStarts = [];
let finishedMs;
child.stdout.on("data", (chunk) => {
  output += chunk;
  process.stdout.write(chunk);
  const nowMs = performance.now();
  const lines = (partialLine + chunk).split("\n");
  partialLine = lines.pop();
  for (const line of lines) {
    const plain = stripColour(line).trim();
    if (TEST_FILE.test(plain) && !plain.includes(" ")) fileStarts.push({ name: plain, startMs: nowMs });
    else if (finishedMs === undefined && /^Total:/.test(plain)) finishedMs = nowMs;
  }
});

function stripColour(text) {
  return text.replace(/\u001b\[[0-9;]*m/g, "");
}

function printTimings() {
  if (fileStarts.length === 0) return;
  const endMs = finishedMs ?? performance.now();
  const files = fileStarts.map((file, at) => ({ name: file.name, wallMs: (fileStarts[at + 1]?.startMs ?? endMs) - file.startMs }));
  const shown = allTimings ? files : [...files].sort((a, b) => b.wallMs - a.wallMs).slice(0, 10);
  const seconds = (ms) => (ms / 1000).toFixed(1).padStart(7);
  console.log(`${allTimings ? "Every file" : "Slowest files"} (wall s): loading all ${files.length} took ${seconds(fileStarts[0].startMs - startedMs).trim()} s, all of it ${seconds(endMs - startedMs).trim()} s`);
  for (const file of shown) console.log(`${seconds(file.wallMs)}  ${file.name}`);
}

child.on("close", (code) => {
  printTimings();
  const plain = stripColour(output);
  const number = (label) => Number(new RegExp(`${label}:\\s+(\\d+)`).exec(plain)?.[1] ?? NaN);
  // uvu's Total counts the tests that ran (skipped ones are not in it); Passed, those that passed.
  const total = number("Total");
  const passed = number("Passed");
  const skipped = number("Skipped") || 0;
  if (!Number.isFinite(total) || !Number.isFinite(passed) || total + skipped === 0) {
    console.log(`0 passed, 1 failed (no test totals: uvu exited ${code})`);
    process.exit(1);
  }
  // uvu exiting non-zero is a failure even when its counts say none (a hook or a file that threw).
  const failed = code === 0 ? total - passed : Math.max(1, total - passed);
  console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
  process.exit(failed === 0 ? 0 : 1);
});
