import { test } from "uvu";
import * as assert from "uvu/assert";
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { PACKAGE_ROOT } from "../harness/paths.js";

/**
 * A user's clone holds this repository only: no file may send a reader to a page outside it, and
 * every relative link in the Markdown must land on a file (and heading) that exists here.
 */

const SKIPPED_DIRS = new Set(["node_modules", "dist", ".git", ".cache", "test-output", "build"]);

/** The tracked files (git), or every file outside build outputs where the tree is not a git checkout. */
function repositoryFiles(): string[] {
  const git = spawnSync("git", ["ls-files", "-z"], { cwd: PACKAGE_ROOT, encoding: "utf8" });
  if (git.status === 0 && git.stdout.length > 0) return git.stdout.split("\0").filter((f) => f !== "" && !f.startsWith("node_modules/") && existsSync(join(PACKAGE_ROOT, f)));
  const walk = (dir: string): string[] => readdirSync(join(PACKAGE_ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = dir === "" ? entry.name : `${dir}/${entry.name}`;
    if (entry.isDirectory()) return SKIPPED_DIRS.has(entry.name) || path === "reports/runs" ? [] : walk(path);
    return entry.isFile() ? [path] : [];
  });
  return walk("");
}

/** Text files only: binary fixtures (.npy, .gguf) hold no references. */
function textOf(path: string): string | undefined {
  const full = join(PACKAGE_ROOT, path);
  if (statSync(full).size > 2_000_000) return undefined;
  const bytes = readFileSync(full);
  return bytes.includes(0) ? undefined : bytes.toString("utf8");
}

const files = repositoryFiles();
const texts = new Map(files.flatMap((f) => { const t = textOf(f); return t === undefined ? [] : [[f, t] as const]; }));

// Spelled in pieces so this file does not match itself. The shared workspace sits beside the
// developers' checkouts (so a relative path to it even resolves there) and never beside a user's clone.
const outsidePatterns = [new RegExp(["\\.\\.", "shared"].join("/")), new RegExp(["shared", "reference"].join("/"))];
const referencePages = new RegExp(`\\b(${["METRICS", "COPY-MODEL"].join("|")})\\.md\\b`, "g");
const basenames = new Set(files.map((f) => f.split("/").pop()));

test("no file refers to pages outside the repository (the shared workspace, or reference pages it does not hold)", () => {
  assert.ok(texts.size > 50, `only ${texts.size} text files found: the scan is not looking at the repository`);
  const offenders: string[] = [];
  for (const [path, text] of texts) {
    text.split("\n").forEach((line, i) => {
      const outside = outsidePatterns.some((pattern) => pattern.test(line));
      const missingPage = [...line.matchAll(referencePages)].some((match) => !basenames.has(match[0]));
      if (outside || missingPage) offenders.push(`${path}:${i + 1}: ${line.trim()}`);
    });
  }
  assert.equal(offenders, [], `references to files this repository does not have:\n${offenders.join("\n")}`);
});

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function anchorOf(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, "").replace(/ /g, "-");
}

function anchorsIn(markdown: string): Set<string> {
  return new Set(markdown.split("\n").filter((line) => /^#{1,6} /.test(line)).map((line) => anchorOf(line.replace(/^#+ /, ""))));
}

test("every relative link in the Markdown resolves to a file here, and its #anchor to a heading", () => {
  const broken: string[] = [];
  let checked = 0;
  for (const [path, text] of texts) {
    if (!path.endsWith(".md")) continue;
    const withoutCode = text.replace(/```[\s\S]*?```/g, "");
    for (const [, target] of withoutCode.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/i.test(target)) continue;
      checked++;
      const [file, anchor] = target.split("#");
      const resolved = file === "" ? join(PACKAGE_ROOT, path) : join(PACKAGE_ROOT, dirname(path), file);
      if (!existsSync(resolved) || relative(PACKAGE_ROOT, resolved).startsWith("..")) { broken.push(`${path}: ${target} (no such file in the repository)`); continue; }
      if (anchor !== undefined && resolved.endsWith(".md") && !anchorsIn(readFileSync(resolved, "utf8")).has(anchor)) broken.push(`${path}: ${target} (no heading with that anchor)`);
    }
  }
  assert.ok(checked >= 5, `only ${checked} relative links found`);
  assert.equal(broken, [], broken.join("\n"));
});

test("the metric definitions cover every number the harness reports by name", () => {
  const metrics = texts.get("docs/metrics.md");
  assert.ok(metrics !== undefined, "docs/metrics.md is missing");
  for (const name of ["STRICT", "NEAR-TIE", "FORWARD-DIVERGENT", "gap_lower_bound", "kld_floored_terms", "same_top", "rms_delta_p", "logprob_bytes_differ", "demand_bytes", "TTFT", "TPOT", "Goodput", "SLO validity", "envelope"]) {
    assert.ok(metrics.includes(name), `docs/metrics.md does not define ${name}`);
  }
});

test.run();
