#!/usr/bin/env node
// Builds native/ with node-gyp against the Node headers in /usr/include/node when they are there
// (offline): the plugin host addon and the reference CPU kernel plugin (native/), and the addon that
// reaches the llama.cpp context inside node-llama-cpp's (native/llama-context/, which needs
// llama.cpp's headers: taken from the exact source node-llama-cpp ships, with git). A machine
// without a compiler still installs: each failure is written to its build/BUILD_FAILED; a kernel
// suite then stops with that reason (exit 2, never a pass), and llama.cpp runs with its threads
// created per graph (slower, said on stderr).
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const nodeGyp = join(root, "node_modules", "node-gyp", "bin", "node-gyp.js");

function outputOf(result) {
  return `${result.error?.message ?? ""}${result.stdout ?? ""}${result.stderr ?? ""}`.trim().split("\n").slice(-15).join("\n");
}

/** llama.cpp's public headers, from the git bundle of the source node-llama-cpp's binaries were built from. */
function extractLlamaHeaders(destination) {
  const bundle = join(root, "node_modules", "node-llama-cpp", "llama", "gitRelease.bundle");
  if (!existsSync(bundle)) return `no llama.cpp source bundle at ${bundle}`;
  const scratch = mkdtempSync(join(tmpdir(), "bb-llama-headers-"));
  try {
    const clone = spawnSync("git", ["clone", "--quiet", "--bare", bundle, scratch + "/repo"], { encoding: "utf8" });
    if (clone.status !== 0) return `git could not read the bundle: ${outputOf(clone)}`;
    const archive = spawnSync("git", ["--git-dir", scratch + "/repo", "archive", "--format=tar", "HEAD", "include", "ggml/include"], { maxBuffer: 64 << 20 });
    if (archive.status !== 0) return `git archive failed: ${outputOf({ ...archive, stderr: archive.stderr?.toString() })}`;
    rmSync(destination, { recursive: true, force: true });
    mkdirSync(destination, { recursive: true });
    const untar = spawnSync("tar", ["-x", "-C", destination], { input: archive.stdout, encoding: "utf8" });
    return untar.status === 0 ? undefined : `tar failed: ${outputOf(untar)}`;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** Runs node-gyp in `directory`; on failure records why in build/BUILD_FAILED and warns. */
function build(directory, what, consequence, prepare) {
  const failed = join(directory, "build", "BUILD_FAILED");
  const prepared = prepare?.();
  const result = prepared !== undefined
    ? { status: 1, stdout: "", stderr: prepared }
    : existsSync(nodeGyp)
      ? spawnSync(process.execPath, [nodeGyp, "rebuild", ...(existsSync("/usr/include/node/node_api.h") ? ["--nodedir=/usr"] : [])], { cwd: directory, encoding: "utf8" })
      : { status: 1, stdout: "", stderr: "node-gyp is not installed (a devDependency)" };
  if (result.status === 0) {
    rmSync(failed, { force: true });
    console.log(`native: built ${what}`);
    return;
  }
  mkdirSync(dirname(failed), { recursive: true });
  writeFileSync(failed, `${outputOf(result)}\n`);
  console.warn(`warning: native build of ${what} failed; ${consequence} (see ${failed})\n  hint: install git, g++ and make, then run npm run build:native`);
}

const native = join(root, "native");
build(native, "the plugin host and the reference kernel plugin", "kernel suites cannot run");
const llamaContext = join(native, "llama-context");
build(llamaContext, "the llama.cpp context addon", "llama.cpp creates its threads per graph (slower) and our server samples one sequence at a time", () => extractLlamaHeaders(join(llamaContext, "llama-headers")));
