#!/usr/bin/env node
// Runs the uvu suites compiled into dist/test and ends with the plain line CI reads:
// "N passed, N failed, N skipped". uvu prints its own totals; we parse and restate them.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const uvu = fileURLToPath(new URL("../node_modules/uvu/bin.js", import.meta.url));
const child = spawn(process.execPath, [uvu, "dist/test", "\\.test\\.js$", ...process.argv.slice(2)], { stdio: ["ignore", "pipe", "inherit"] });
let output = "";
child.stdout.on("data", (chunk) => {
  output += chunk;
  process.stdout.write(chunk);
});
child.on("close", (code) => {
  const plain = output.replace(/\u001b\[[0-9;]*m/g, "");
  const number = (label) => Number(new RegExp(`${label}:\\s+(\\d+)`).exec(plain)?.[1] ?? NaN);
  const total = number("Total");
  const passed = number("Passed");
  const skipped = number("Skipped") || 0;
  if (!Number.isFinite(total) || total === 0) {
    console.log("0 passed, 1 failed (no tests ran)");
    process.exit(1);
  }
  const failed = total - passed - skipped;
  console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
  process.exit(code === 0 && failed === 0 ? 0 : 1);
});
