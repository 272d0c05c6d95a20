import { execFileSync } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { join } from "node:path";
import { PACKAGE_ROOT } from "../paths.js";

/** What a suite's command writes for llama.cpp's own server, built by scripts/build-llama-server.sh. */
export const LLAMA_SERVER_PLACEHOLDER = "{llama-server}";

/** Where the build script puts (or would put) llama-server for this checkout's llama.cpp: the script alone knows its cache key. */
export function llamaServerPath(): string {
  return execFileSync("bash", [join(PACKAGE_ROOT, "scripts", "build-llama-server.sh"), "--path"], { encoding: "utf8" }).trim();
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
