#!/usr/bin/env node
// Builds native/: the plugin host addon (node-addon-api) and the reference CPU kernel plugin, with
// node-gyp against the Node headers in /usr/include/node when they are there (offline). A machine
// without a compiler still installs: the failure is written to native/build/BUILD_FAILED, and a
// kernel suite then stops with that reason (exit 2, never a pass).
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const native = join(dirname(fileURLToPath(import.meta.url)), "..", "native");
const nodeGyp = join(native, "..", "node_modules", "node-gyp", "bin", "node-gyp.js");
const failed = join(native, "build", "BUILD_FAILED");
const args = [nodeGyp, "rebuild", ...(existsSync("/usr/include/node/node_api.h") ? ["--nodedir=/usr"] : [])];
const result = existsSync(nodeGyp) ? spawnSync(process.execPath, args, { cwd: native, encoding: "utf8" }) : { status: 1, stdout: "", stderr: "node-gyp is not installed (a devDependency)" };
if (result.status === 0) {
  rmSync(failed, { force: true });
  console.log("native: built the plugin host and the reference kernel plugin");
} else {
  const why = `${result.stdout ?? ""}${result.stderr ?? ""}`.trim().split("\n").slice(-15).join("\n");
  mkdirSync(dirname(failed), { recursive: true });
  writeFileSync(failed, `${why}\n`);
  console.warn(`warning: native build failed; kernel suites cannot run (see ${failed})\n  hint: install g++ and make, then run npm run build:native`);
}
