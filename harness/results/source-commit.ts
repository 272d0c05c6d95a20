import { spawnSync } from "node:child_process";

/**
 * The commit a run was made from, so that runs made on several boxes can be proven to test the
 * same code before they are merged: GITHUB_SHA under GitHub Actions (every job of a workflow run
 * has the same one), else `git rev-parse HEAD` in the working directory (the team's checkout, whose
 * runner, plugin and suites are under test); null outside a git checkout.
 */
export function sourceCommit(cwd = process.cwd()): string | null {
  const fromCi = process.env.GITHUB_SHA;
  if (fromCi !== undefined && fromCi !== "") return fromCi;
  const git = spawnSync("git", ["rev-parse", "HEAD"], { cwd, encoding: "utf8", timeout: 10_000 });
  return git.status === 0 && /^[0-9a-f]{40}$/.test(git.stdout.trim()) ? git.stdout.trim() : null;
}
