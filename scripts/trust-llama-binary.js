#!/usr/bin/env node
// Remembers, for this machine, that node-llama-cpp's prebuilt llama.cpp binary passed its own
// compatibility test, so that later processes load it without repeating the test.
//
// Why: on Linux, node-llama-cpp 3.21.1 forks a node child to test a prebuilt binary on every
// getLlama(), with no option to skip it: about 0.5 s of CPU per process that loads llama.cpp. A run
// of the test suite starts ~190 such processes (each `bench run`, `bench serve`, test file), 90 s of
// CPU. A *local build* whose metadata names this machine's OS is loaded without the test, so after
// one real test passes here we register the prebuilt binary as one: a folder in node-llama-cpp's
// llama/localBuilds holding symlinks to the prebuilt folder's files (the addon and ggml's libraries)
// and the prebuilt build's metadata with this machine's OS in it. The same binary runs; only the repeated test is gone.
//
// It runs at install (`prepare`), after build-native.js. It depends on node-llama-cpp's file layout,
// so it acts only on the exact version we pin and on Linux, checks afterwards that getLlama() takes
// the registration (else removes it), and never fails the install: without it, everything runs as
// before, only slower to start. `npm ci` removes it with node_modules.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const PINNED_VERSION = "3.21.1";
const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const packageDir = join(root, "node_modules", "node-llama-cpp");
const MARK = "registered by bringup-bench scripts/trust-llama-binary.js after node-llama-cpp's binary test passed on this machine";

function warn(reason) {
  console.warn(`warning: node-llama-cpp's prebuilt binary is not registered as tested (${reason}); every process that loads llama.cpp repeats its binary test (~0.5 s of CPU)\n  hint: run node scripts/trust-llama-binary.js to retry`);
}

/** How a fresh process loads llama.cpp: the build type getLlama() chose, or why it could not load. */
function loadInChild() {
  // A file, not `node -e`: node-llama-cpp's test forks node with this process's exec arguments.
  const probe = `import { readFileSync } from "node:fs";
import { getLlama, LlamaLogLevel } from ${JSON.stringify(pathToFileURL(join(packageDir, "dist", "index.js")).href)};
const llama = await getLlama({ gpu: false, build: "never", maxThreads: 1, logLevel: LlamaLogLevel.error });
const cpuLibraries = [...new Set(readFileSync("/proc/self/maps", "utf8").match(/libggml-cpu-\\w+\\.so/g) ?? [])];
console.log(JSON.stringify({ buildType: llama.buildType, release: llama.llamaCppRelease.release, cpuLibraries }));
await llama.dispose();`;
  const scratch = mkdtempSync(join(tmpdir(), "bb-llama-probe-"));
  const probeFile = join(scratch, "probe.mjs");
  writeFileSync(probeFile, probe);
  const child = spawnSync(process.execPath, [probeFile], { cwd: root, encoding: "utf8", timeout: 120_000 });
  rmSync(scratch, { recursive: true, force: true });
  if (child.status !== 0) return { error: `a probe process could not load llama.cpp: ${(child.stderr || child.error?.message || "").trim().split("\n").slice(-2).join(" ")}` };
  try {
    return JSON.parse(child.stdout.trim().split("\n").at(-1));
  } catch {
    return { error: `the probe printed no result: ${child.stdout.trim().slice(-200)}` };
  }
}

async function main() {
  if (process.platform !== "linux" || process.arch !== "x64") return; // node-llama-cpp tests prebuilt binaries only on Linux; we vouch for the layout of linux-x64 only
  let version;
  try {
    version = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")).version;
  } catch {
    return warn("node-llama-cpp is not installed");
  }
  if (version !== PINNED_VERSION) return warn(`node-llama-cpp is ${version}, and this script knows the layout of ${PINNED_VERSION} only`);

  const config = await import(pathToFileURL(join(packageDir, "dist", "config.js")).href);
  const { getPlatformInfo } = await import(pathToFileURL(join(packageDir, "dist", "bindings", "utils", "getPlatformInfo.js")).href);
  const target = join(config.llamaLocalBuildBinsDirectory, "linux-x64");
  const metadataPath = join(target, "Release", config.buildMetadataFileName);
  if (existsSync(metadataPath) && !readFileSync(metadataPath, "utf8").includes(MARK)) return; // a real local build (node-llama-cpp's own `source build`): not ours to touch

  // The real test: a fresh process loads the prebuilt binary the way every run does, test included.
  rmSync(target, { recursive: true, force: true });
  const tested = loadInChild();
  if (tested.error !== undefined) return warn(tested.error);
  if (tested.buildType !== "prebuilt" || tested.cpuLibraries.length === 0) return warn(`getLlama() loaded a ${tested.buildType} binary with ${tested.cpuLibraries.length} ggml CPU libraries, not the prebuilt one with its CPU library`);

  const prebuiltPackage = createRequire(join(packageDir, "package.json")).resolve("@node-llama-cpp/linux-x64");
  const prebuiltDir = join((await import(pathToFileURL(prebuiltPackage).href)).getBinsDir().binsDir, "linux-x64");
  const prebuiltMetadata = JSON.parse(readFileSync(join(prebuiltDir, config.buildMetadataFileName), "utf8"));
  const metadata = { ...prebuiltMetadata, buildOptions: { ...prebuiltMetadata.buildOptions, platformInfo: await getPlatformInfo() }, note: MARK };

  const scratch = `${target}.tmp-${process.pid}`;
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(join(scratch, "Release"), { recursive: true });
  // Every file of the prebuilt folder, linked: node-llama-cpp loads ggml's CPU backends from the
  // folder it found the addon in. Relative, so that a copy of node_modules holding both packages
  // points at its own copy.
  for (const file of readdirSync(prebuiltDir)) {
    if (file !== config.buildMetadataFileName) symlinkSync(relative(join(target, "Release"), join(prebuiltDir, file)), join(scratch, "Release", file));
  }
  writeFileSync(join(scratch, "Release", config.buildMetadataFileName), `${JSON.stringify(metadata)}\n`);
  writeFileSync(join(scratch, "buildDone.status"), `${MARK}\n`);
  renameSync(scratch, target);

  const registered = loadInChild();
  // The same llama.cpp and the same ggml CPU library as the tested load, or the registration goes.
  const loaded = (result) => `${result.buildType} binary, llama.cpp ${result.release}, CPU library ${result.cpuLibraries?.join(" + ") || "none"}`;
  if (registered.buildType !== "localBuild" || loaded({ ...registered, buildType: "" }) !== loaded({ ...tested, buildType: "" })) {
    rmSync(target, { recursive: true, force: true });
    return warn(registered.error ?? `getLlama() did not load the registration as tested: ${loaded(registered)} against ${loaded(tested)}`);
  }
  console.log(`native: node-llama-cpp's prebuilt binary passed its test on ${metadata.buildOptions.platformInfo.name} ${metadata.buildOptions.platformInfo.version}; registered so later processes skip it`);
}

await main().catch((error) => warn(error.message));
