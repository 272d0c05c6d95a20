// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { existsSync, readFileSync, realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { llamaRuntime } from "../harness/sut/llamacpp.js";

// What `npm install` leaves behind (scripts/trust-llama-binary.js): node-llama-cpp's prebuilt binary,
// tested once on this machine, registered so that no later process forks the test again.
const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const packageDir = join(root, "node_modules", "node-llama-cpp");
const registration = join(packageDir, "llama", "localBuilds", "linux-x64");
const onLinuxX64 = process.platform === "linux" && process.arch === "x64";

function prebuiltFolder(): string {
  const entry = createRequire(join(packageDir, "package.json")).resolve("@node-llama-cpp/linux-x64");
  return join(dirname(entry), "..", "bins", "linux-x64");
}

test("the install registered the prebuilt binary, and llama.cpp loads exactly that binary without its per-process test", async () => {
  if (!onLinuxX64) return; // node-llama-cpp tests prebuilt binaries per process only on Linux; there is nothing to register elsewhere
  assert.ok(existsSync(join(registration, "buildDone.status")), `no registration at ${registration}: npm install should have made it (run node scripts/trust-llama-binary.js and read its warning)`);
  const registered = JSON.parse(readFileSync(join(registration, "Release", "_nlcBuildMetadata.json"), "utf8"));
  const prebuilt = JSON.parse(readFileSync(join(prebuiltFolder(), "_nlcBuildMetadata.json"), "utf8"));
  assert.match(registered.note, /binary test passed on this machine/);
  // The same build: only the OS it was tested on differs from the prebuilt metadata.
  assert.equal({ ...registered.buildOptions, platformInfo: undefined }, { ...prebuilt.buildOptions, platformInfo: undefined });
  assert.equal(realpathSync(join(registration, "Release", "llama-addon.node")), realpathSync(join(prebuiltFolder(), "llama-addon.node")));

  const llama = await llamaRuntime();
  assert.equal(llama.buildType, "localBuild", "getLlama() did not take the registration: every process repeats the binary test");
  assert.equal(llama.llamaCppRelease.release, prebuilt.buildOptions.llamaCpp.release);
  // ggml's CPU backend is found through the registration's folder: one CPU library is mapped, from the prebuilt folder.
  const cpuLibraries = [...new Set(readFileSync("/proc/self/maps", "utf8").match(/\S*libggml-cpu-\w+\.so/g) ?? [])];
  assert.equal(cpuLibraries.length, 1, `ggml CPU libraries mapped: ${cpuLibraries.join(", ") || "none"}`);
  assert.equal(dirname(realpathSync(cpuLibraries[0]!)), realpathSync(prebuiltFolder()));
});

test.run();
