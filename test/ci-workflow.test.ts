import { test } from "uvu";
import * as assert from "uvu/assert";
import { spawnSync } from "node:child_process";
import { chmodSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { checkShardsJoin } from "../harness/results/merge.js";
import { readRun, type StoredRun } from "../harness/results/read-run.js";
import { BENCH_BIN, CLI_HANG_GUARD_MS, temporaryDirectory, withoutForceColor } from "./helpers/workspace.js";
import { readWorkflowSteps, type WorkflowStep } from "./helpers/workflow-steps.js";

/**
 * docs/ci/quietbox.yml executed here, step by step: the same shell lines, in a workspace standing in
 * for the checkout, with the reference forward as the team's runner, the reference kernel plugin as
 * its plugin, and artifacts copied between jobs as upload/download-artifact do.
 */
const WORKFLOW = resolve(PACKAGE_ROOT, "docs", "ci", "quietbox.yml");
const workflow = readWorkflowSteps(WORKFLOW);
const work = temporaryDirectory("ci-workflow");
test.after(() => work.remove());

const COMMIT = "0123456789abcdef0123456789abcdef01234567";
const REFERENCE = `python3 ${PACKAGE_ROOT}/harness/oracle/float64/reference_forward.py {model}`;
const SHARDS = 2;

// `npx bench` is this checkout's CLI (the team's `npm ci` installs it).
const shims = join(work.path, "bin");
mkdirSync(shims);
writeFileSync(join(shims, "npx"), `#!/bin/sh\n[ "$1" = bench ] || exit 127\nshift\nexec "${process.execPath}" "${BENCH_BIN}" "$@"\n`);
chmodSync(join(shims, "npx"), 0o755);

interface StepResult { readonly command: string; readonly status: number | null; readonly output: string }

/** The team's battery, as the workflow's env names it: here two suites, two prompts' worth of work. */
function teamEnv(runner: string): Record<string, string> {
  return {
    BENCH_SUITES: "--suite traced-reference --suite owned-kernels --prompt 0 --case 0 --case 1",
    BENCH_RUNNER: runner,
    BENCH_PLUGIN: resolve(PACKAGE_ROOT, "native", "build", "Release", "bb_reference_plugin.so"),
  };
}

function expand(text: string, shard: number | undefined, env: Record<string, string>): string {
  return text.replace(/\$\{\{ *([\w.-]+) *\}\}/g, (_, name: string) => {
    if (name === "matrix.shard" && shard !== undefined) return String(shard);
    if (name === "strategy.job-total") return String(SHARDS);
    if (name.startsWith("env.") && env[name.slice(4)] !== undefined) return env[name.slice(4)];
    throw new Error(`${WORKFLOW}: no value for \${{ ${name} }} in this test`);
  });
}

const shell = (command: string, cwd: string, env: Record<string, string>): StepResult => {
  const result = spawnSync("bash", ["-c", command], { cwd, encoding: "utf8", timeout: CLI_HANG_GUARD_MS, env: { ...withoutForceColor(process.env), NO_COLOR: "1", CI: "1", PATH: `${shims}:${process.env.PATH}`, GITHUB_SHA: COMMIT, ...env } });
  return { command, status: result.status, output: result.stdout + result.stderr };
};

/** The workflow's env with the team's values replaced by this test's. */
const jobEnv = (env: Record<string, string>): Record<string, string> => ({ ...workflow.env, ...env });

/** One job of the workflow in `workspace` (its checkout), with GitHub's step conditions: a failed step skips the rest but `if: always()`. */
function runJob(name: string, workspace: string, env: Record<string, string>, shard?: number): StepResult[] {
  const steps: readonly WorkflowStep[] | undefined = workflow.jobs[name];
  if (steps === undefined) throw new Error(`${WORKFLOW}: no job ${name}`);
  const allEnv = jobEnv(env);
  const results: StepResult[] = [];
  let failed = false;
  for (const step of steps) {
    if (failed && step.if !== "always()") continue;
    if (step.uses !== undefined) {
      transferArtifacts(step, workspace, expand(step.with ?? "", shard, allEnv));
      continue;
    }
    if (step.run === "npm ci") continue; // installed once for the whole test run
    const result = shell(expand(step.run!, shard, allEnv), workspace, allEnv);
    results.push(result);
    failed ||= result.status !== 0;
  }
  return results;
}

/** upload-artifact copies `path` into the run's artifacts under `name`; download-artifact copies each matching one into `path/<name>`. */
function transferArtifacts(step: WorkflowStep, workspace: string, withText: string): void {
  const artifacts = join(workspace, "..", "artifacts");
  const value = (key: string) => new RegExp(`${key}: "?([^",}]+)"?`).exec(withText)?.[1].trim();
  if (step.uses!.startsWith("actions/upload-artifact")) {
    for (const path of value("path")!.split("\\n").filter((p) => existsSync(join(workspace, p)))) cpSync(join(workspace, path), join(artifacts, value("name")!, path.endsWith("/") ? "" : path), { recursive: true });
  } else if (step.uses!.startsWith("actions/download-artifact")) {
    const pattern = new RegExp(`^${value("pattern")!.replace("*", ".*")}$`);
    for (const name of readdirSync(artifacts).filter((n) => pattern.test(n))) cpSync(join(artifacts, name), join(workspace, value("path")!, name), { recursive: true });
  } else if (!step.uses!.startsWith("actions/checkout")) {
    throw new Error(`${WORKFLOW}: the test cannot stand in for ${step.uses}`);
  }
}

/** A whole workflow run: every shard's job (each in its own checkout, as on its own box), then the gate job. */
function runWorkflow(name: string, env: Record<string, string>) {
  const root = join(work.path, name);
  const shards = Array.from({ length: SHARDS }, (_, i) => {
    const checkout = join(root, `box-${i + 1}`);
    mkdirSync(checkout, { recursive: true });
    return runJob("shard", checkout, env, i + 1);
  });
  const gateCheckout = join(root, "gate");
  mkdirSync(gateCheckout, { recursive: true });
  return { root, gateCheckout, shards, gate: runJob("gate", gateCheckout, env) };
}

const verdictKeys = (run: StoredRun) => run.summary.verdicts.map((v) => `${v.suite}/${v.arm}/${v.check}/${v.gate}/${v.status}`);

/** The shard step's command without --shard: the battery on one box, for comparison. */
function unshardedRun(root: string, env: Record<string, string>): { result: StepResult; run: StoredRun } {
  const shardStep = workflow.jobs.shard.find((step) => step.run?.includes("--shard") === true)!;
  const command = expand(shardStep.run!, 1, env).replace(/ --shard \S+/, "").replace(/--run-id \S+/, "--run-id whole");
  const checkout = join(root, "one-box");
  mkdirSync(checkout, { recursive: true });
  const result = shell(command, checkout, jobEnv(env));
  return { result, run: readRun(join(checkout, "reports", "runs", "whole")) };
}

test("the workflow shown in docs/quietbox.md is docs/ci/quietbox.yml, verbatim", () => {
  const page = readFileSync(resolve(PACKAGE_ROOT, "docs", "quietbox.md"), "utf8");
  assert.ok(page.includes(readFileSync(WORKFLOW, "utf8").trimEnd()), "docs/quietbox.md must embed docs/ci/quietbox.yml as it is");
});

test("the workflow on two boxes: shards merged and gated equal the unsharded run; the first run creates the baseline, the next is held to it", () => {
  const env = teamEnv(REFERENCE);
  const { root, gateCheckout, shards, gate } = runWorkflow("passing", env);
  for (const [i, steps] of shards.entries()) assert.is(steps[0].status, 0, `shard ${i + 1}: ${steps[0].output}`);
  // Each box ran its own share: one arm each, dealt in suite order.
  assert.equal(shards.map((steps) => /shard \d\/2: ([^\n]*) of 2 arms/.exec(steps[0].output)?.[1]), ["traced-reference/runner", "owned-kernels/plugin"]);
  const [merge, firstGate, report] = gate;
  assert.is(merge.status, 0, merge.output);
  assert.is(firstGate.status, 0, firstGate.output);
  assert.match(firstGate.output, /created reports\/baselines\/quietbox\.json from run merged \(first run/);
  assert.is(report.status, 0, report.output);
  assert.ok(existsSync(join(gateCheckout, "reports", "runs", "merged", "report.html")));
  assert.ok(existsSync(join(root, "artifacts", "bench-merged", "reports", "baselines", "quietbox.json")), "the new baseline is uploaded for the team to commit");

  // The next workflow run, with the baseline committed: the same gate step now holds the run to it (--strict).
  const gateStep = workflow.jobs.gate.find((step) => step.run?.includes("bench gate") === true)!;
  const held = shell(expand(gateStep.run!, undefined, jobEnv(env)), gateCheckout, jobEnv(env));
  assert.is(held.status, 0, held.output);
  assert.match(held.output, /ok +traced-reference\/runner\/decode: demand \d+ B/);
  assert.match(held.output, /PASS \(exit 0\)/);

  const merged = readRun(join(gateCheckout, "reports", "runs", "merged"));
  const whole = unshardedRun(root, env);
  assert.is(whole.result.status, 0, whole.result.output);
  assert.equal(verdictKeys(merged), verdictKeys(whole.run));
  assert.is(merged.summary.exit_code, whole.run.summary.exit_code);
  assert.is(merged.cells.length, whole.run.cells.length);
  assert.equal(merged.summary.counts, whole.run.summary.counts);
  assert.is(merged.summary.commit, COMMIT);
  assert.equal(merged.summary.merged_from?.map((m) => m.shard), ["1/2", "2/2"]);
});

test("a failing battery: the merged run fails as the unsharded one does (exit 1), and no baseline is taken from it", () => {
  const env = teamEnv(`${REFERENCE} --fault trace-position-frozen`);
  const { root, gateCheckout, shards, gate } = runWorkflow("failing", env);
  assert.equal(shards.map((steps) => steps[0].status), [1, 0]);
  const [merge, firstGate] = gate;
  assert.is(merge.status, 1, merge.output);
  assert.is(firstGate.status, 1, firstGate.output);
  assert.match(firstGate.output, /NOT CREATED reports\/baselines\/quietbox\.json: run merged is complete with exit 1/);
  assert.not.ok(existsSync(join(gateCheckout, "reports", "baselines", "quietbox.json")));
  const whole = unshardedRun(root, env);
  assert.is(whole.result.status, 1);
  assert.equal(verdictKeys(readRun(join(gateCheckout, "reports", "runs", "merged"))), verdictKeys(whole.run));
});

test("bench merge refuses, in one line, shards of another commit, a missing or repeated shard, a run that is no shard, other options, suites or goldens, an arm in two shards", () => {
  const box = (n: number) => join(work.path, "passing", `box-${n}`, "reports", "runs", `shard-${n}`);
  const merge = (...args: string[]) => shell(`npx bench merge ${args.join(" ")} --out ${join(work.path, "refused")}`, work.path, {});
  // Shard 2 again, on another commit.
  const other = join(work.path, "other-commit");
  mkdirSync(other);
  const shardStep = workflow.jobs.shard.find((step) => step.run?.includes("--shard") === true)!;
  const env = jobEnv(teamEnv(REFERENCE));
  assert.is(shell(expand(shardStep.run!, 2, env), other, { ...env, GITHUB_SHA: "f".repeat(40) }).status, 0);
  const refusals = [
    [merge(box(1), join(other, "reports", "runs", "shard-2")), /run shard-1 and run shard-2 were made from different commits \(0123456789abcdef0123456789abcdef01234567 vs f{40}\)/],
    [merge(box(1)), /shard 2\/2 missing \(given: 1\/2\)/],
    [merge(box(1), box(1), box(2)), /shard 1\/2 given twice: run shard-1 and run shard-1/],
    [merge(box(1), join(work.path, "passing", "one-box", "reports", "runs", "whole")), /run whole was not made with --shard/],
  ] as const;
  for (const [result, reason] of refusals) {
    assert.is(result.status, 2, result.output);
    assert.match(result.output, reason);
    assert.is(result.output.trim().split("\n").length, 1, result.output);
  }
  assert.not.ok(existsSync(join(work.path, "refused")), "a refused merge writes nothing");

  // What the real runs cannot give on demand, made in memory from them: FAKE options, suite hashes and goldens, a FAKE second claim on an arm.
  const [one, two] = [readRun(box(1)), readRun(box(2))];
  const withOracle = (run: StoredRun, created: string): StoredRun => ({ ...run, summary: { ...run.summary, oracles: [{ suite: "traced-reference", goldens: "/x/goldens/tiny-random.F32/parity16", model: {}, oracle: { created } }] } });
  assert.throws(() => checkShardsJoin([withOracle(one, "a"), withOracle(two, "b")]), /hold traced-reference tiny-random\.F32\/parity16 to different goldens/);
  const otherOptions = { ...two, summary: { ...two.summary, selection: { ...two.summary.selection!, prompts: [1] } } };
  assert.throws(() => checkShardsJoin([one, otherOptions]), /run shard-1 and run shard-2 were made with different options \(.*"prompts":\[0\].* vs .*"prompts":\[1\]/);
  const otherSuite = { ...two, summary: { ...two.summary, suites: two.summary.suites.map((suite, i) => (i === 0 ? { ...suite, sha256: "0".repeat(64) } : suite)) } };
  assert.throws(() => checkShardsJoin([one, otherSuite]), /run shard-1 and run shard-2 ran different suites \(traced-reference sha256 [0-9a-f]{12}, owned-kernels .* vs traced-reference sha256 000000000000/);
  const armOfTwo = { ...two, summary: { ...two.summary, suts: [...two.summary.suts, ...one.summary.suts] } };
  assert.throws(() => checkShardsJoin([one, armOfTwo]), /arm traced-reference\/runner ran in both run shard-1 \(shard 1\/2\) and run shard-2 \(shard 2\/2\)/);
});

test.run();
