import { execFileSync, spawnSync } from "node:child_process";
import { accessSync, constants, statSync } from "node:fs";
import { join } from "node:path";
import { PACKAGE_ROOT } from "../paths.js";

/** What a suite's command writes for llama.cpp's own server, built by scripts/build-llama-server.sh. */
export const LLAMA_SERVER_PLACEHOLDER = "{llama-server}";

/** The script's answers in this process, by what its cache key and root are made of (the bundle it hashes, the environment it reads). */
const pathsByInputs = new Map<string, string>();

/**
 * Where the build script puts (or would put) llama-server for this checkout's llama.cpp: the script
 * alone knows its cache key. It hashes node-llama-cpp's 35 MB source bundle to find it, which every
 * `bench run` asks for, so its answer is kept while the bundle and the environment stay the same.
 */
export function llamaServerPath(): string {
  const bundle = statSync(join(PACKAGE_ROOT, "node_modules", "node-llama-cpp", "llama", "gitRelease.bundle"), { throwIfNoEntry: false });
  const inputs = [bundle?.size, bundle?.mtimeMs, bundle?.ino, process.env.BENCH_BUILD_CACHE_DIR, process.env.XDG_CACHE_HOME, process.env.HOME].join("\0");
  let path = pathsByInputs.get(inputs);
  if (path === undefined) {
    path = execFileSync("bash", [join(PACKAGE_ROOT, "scripts", "build-llama-server.sh"), "--path"], { encoding: "utf8" }).trim();
    pathsByInputs.set(inputs, path);
  }
  return path;
}

/**
 * llama-server built (once per machine: the script's cache) and its path, for the scripts that
 * measure our server against it; the build's progress goes to this process's stderr.
 */
export function buildLlamaServer(): string {
  const build = spawnSync(join(PACKAGE_ROOT, "scripts", "build-llama-server.sh"), { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  if (build.status !== 0) throw new Error(`scripts/build-llama-server.sh exited ${build.status}: no llama-server to compare against`);
  return build.stdout.trim().split("\n").at(-1)!;
}

/** The built binary, or undefined when this machine has not built it. */
export function builtLlamaServer(): string | undefined {
  const path = llamaServerPath();
  try {
    accessSync(path, constants.X_OK);
    return path;
  } catch {
    return undefined;
  }
}

/** An arm whose command runs llama-server needs it built. */
export function needsLlamaServer(arm: { readonly command?: readonly string[] }): boolean {
  return (arm.command ?? []).some((part) => part.includes(LLAMA_SERVER_PLACEHOLDER));
}
