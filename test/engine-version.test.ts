import { test } from "uvu";
import * as assert from "uvu/assert";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { llamaServerPath } from "../harness/sut/llama-server-binary.js";
import { llamaCppEngineVersion, sameLlamaCppEngine } from "../harness/sut/llamacpp.js";
import { bench } from "./helpers/workspace.js";

// The embedded engine's string in every provenance record (summary.json suts and oracles, goldens
// manifests): node-llama-cpp's version and, apart from it, the llama.cpp release and source commit it binds.

const packageRoot = join(dirname(createRequire(import.meta.url).resolve("node-llama-cpp")), "..");
const readJson = (path: string) => JSON.parse(readFileSync(path, "utf8")) as Record<string, string>;

test("the engine names node-llama-cpp's version, the llama.cpp release its binaries were built from, and the commit of the source it bundles", async () => {
  const engine = await llamaCppEngineVersion();
  const version = readJson(join(packageRoot, "package.json")).version;
  const release = readJson(join(packageRoot, "llama", "binariesGithubRelease.json")).release;
  const commit = /^([0-9a-f]{40}) HEAD$/m.exec(readFileSync(join(packageRoot, "llama", "gitRelease.bundle")).subarray(0, 512).toString("latin1"))![1];
  assert.is(engine, `node-llama-cpp ${version} / llama.cpp ${release} (ggml-org/llama.cpp@${commit.slice(0, 12)})`);
  assert.is.not(version, release.replace(/^v/, ""), "two versions, not one said twice");
});

// llama-server is built from the same source by scripts/build-llama-server.sh; where it is built here, its own --version must name the same commit.
(existsSync(llamaServerPath()) ? test : test.skip)("llama-server built from the bundled source says the same version and commit", async () => {
  const said = spawnSync(llamaServerPath(), ["--version"], { encoding: "utf8" });
  const line = `${said.stdout}${said.stderr}`;
  const engine = await llamaCppEngineVersion();
  const [, release, commit] = / llama\.cpp v(\S+) \(.*@([0-9a-f]{12})\)$/.exec(engine)!;
  assert.match(line, new RegExp(`version: ${release.replace(/\./g, "\\.")}(-dev)? \\(build \\d+, commit ${commit.slice(0, 7)}`));
});

test("a record made before the commit was said is the same engine; another version is not", async () => {
  const engine = await llamaCppEngineVersion();
  const withoutCommit = engine.replace(/ \([^()]*\)$/, "");
  assert.ok(sameLlamaCppEngine(engine, engine));
  assert.ok(sameLlamaCppEngine(withoutCommit, engine));
  assert.not.ok(sameLlamaCppEngine(withoutCommit.replace(/node-llama-cpp \S+/, "node-llama-cpp 0.0.1"), engine));
  assert.not.ok(sameLlamaCppEngine(engine.replace(/@[0-9a-f]{12}/, "@000000000000"), engine));
  // The committed goldens were recorded without the commit: verifying them warns of no engine change.
  const verified = bench(["goldens", "verify", "goldens/tiny-random.F32/parity16"]);
  assert.is(verified.status, 0, verified.stdout + verified.stderr);
  assert.not.match(verified.stdout + verified.stderr, /this machine runs/);
});

test.run();
