import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { PACKAGE_ROOT } from "../../harness/paths.js";

export const BENCH_BIN = resolve(PACKAGE_ROOT, "bin", "bench.js");

export function temporaryDirectory(prefix: string): { path: string; remove: () => void } {
  const path = mkdtempSync(join(tmpdir(), `bench-${prefix}-`));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** uvu sets FORCE_COLOR, which makes Node warn about NO_COLOR on stderr in every child. */
export function withoutForceColor(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { FORCE_COLOR: _ignored, ...rest } = env;
  return rest;
}

export interface CliResult {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Only a guard against a hung CLI, never a check of its speed: the whole battery takes ~40 s alone
 * on 2 cores but over 300 s with other suites sharing them, and a guard that fires there turns a
 * passing run into "interrupted, exit 2".
 */
export const CLI_HANG_GUARD_MS = 30 * 60_000;

/** Runs the real CLI in a child process, the way a user or CI does. */
export function bench(args: readonly string[], env: Record<string, string> = {}): CliResult {
  const result = spawnSync(process.execPath, [BENCH_BIN, ...args], {
    cwd: PACKAGE_ROOT,
    env: { ...withoutForceColor(process.env), NO_COLOR: "1", CI: "1", ...env },
    encoding: "utf8",
    timeout: CLI_HANG_GUARD_MS,
  });
  // Said in the output every assertion message carries, so a guard that fired never reads as the CLI's own failure.
  const guard = result.error !== undefined ? `\n(test helper: bench ${args.join(" ")}: ${result.error.message}; hang guard ${CLI_HANG_GUARD_MS / 1000} s)\n` : "";
  return { status: result.status, stdout: result.stdout + guard, stderr: result.stderr + guard };
}

/** The CLI as a child this test can signal, and its result once it has exited. */
export function startBench(args: readonly string[], env: Record<string, string> = {}): { readonly child: ChildProcess; readonly result: Promise<CliResult> } {
  const child = spawn(process.execPath, [BENCH_BIN, ...args], { cwd: PACKAGE_ROOT, env: { ...withoutForceColor(process.env), NO_COLOR: "1", CI: "1", ...env } });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => { stdout += chunk; });
  child.stderr.on("data", (chunk) => { stderr += chunk; });
  return { child, result: new Promise((resolve) => child.on("close", (status) => resolve({ status, stdout, stderr }))) };
}

/** The CLI without blocking this process (needed when the test itself hosts the server it talks to). */
export function benchAsync(args: readonly string[], env: Record<string, string> = {}): Promise<CliResult> {
  return startBench(args, env).result;
}
