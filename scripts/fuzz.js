#!/usr/bin/env node
// The parser fuzz properties (test/fuzz.test.ts) at depth: each property runs --scale times as many
// inputs as in `npm test` (default 50). The seed is printed; pass it back with --seed to reproduce.
// Usage: npm run fuzz -- [--scale N] [--seed S]
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const at = args.indexOf(name);
  return at < 0 ? fallback : args[at + 1];
};
const scale = flag("--scale", "50");
const seed = flag("--seed", undefined);
if (!(Number(scale) > 0) || (seed !== undefined && !Number.isInteger(Number(seed)))) {
  console.error("usage: npm run fuzz -- [--scale N] [--seed S]  (N > 0, S an integer)");
  process.exit(2);
}
const uvu = fileURLToPath(new URL("../node_modules/uvu/bin.js", import.meta.url));
const env = { ...process.env, FUZZ_SCALE: scale, ...(seed === undefined ? {} : { FUZZ_SEED: seed }) };
const started = Date.now();
const child = spawn(process.execPath, [uvu, "dist/test", "^fuzz\\.test\\.js$"], { stdio: "inherit", env });
child.on("close", (code) => {
  console.log(`fuzz: ${((Date.now() - started) / 1000).toFixed(0)} s at scale ${scale}, exit ${code}`);
  process.exit(code ?? 1);
});
