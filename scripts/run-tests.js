#!/usr/bin/env node
// Runs the uvu suites compiled into dist/test (or the directory given first) and ends with the
// plain line CI reads: "N passed, N failed, N skipped". uvu prints its own totals; we restate them.
// Usage: node scripts/run-tests.js [dir] [uvu flags]
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const uvu = fileURLToPath(new URL("../node_modules/uvu/bin.js", import.meta.url));
const [first, ...rest] = process.argv.slice(2);
const givenDir = first !== undefined && !first.startsWith("-");
const dir = givenDir ? first : "dist/test";
const flags = givenDir ? rest : process.argv.slice(2);
const child = spawn(process.execPath, [uvu, dir, "\\.test\\.js$", ...flags], { stdio: ["ignore", "pipe", "inherit"] });
let output = "";
child.stdout.on("data", (chunk) => {
  output += chunk;
  process.stdout.write(chunk);
});
child.on("close", (code) => {
  const plain = output.replace(/\u001b\[[0-9;]*m/g, "");
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
