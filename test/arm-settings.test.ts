import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { LlamaCppSettings } from "../harness/sut/llamacpp.js";
import { describeRun, errorLine, runInProcess } from "./helpers/in-process-run.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("arm-settings");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const summary = (runId: string) => JSON.parse(readFileSync(join(runs, runId, "summary.json"), "utf8"));

/** parity16 with other arms, written where a test can point `--suite` at it. */
function paritySuiteWith(arms: unknown[], file: string): string {
  const suite = JSON.parse(readFileSync(join(process.cwd(), "suites", "parity16.json"), "utf8"));
  delete suite.$schema;
  suite.arms = arms;
  const path = join(work.path, file);
  writeFileSync(path, JSON.stringify(suite));
  return path;
}

test("the server arm computes with the KV cache type it is given, and records what the server reports", async () => {
  // `bench run --suite parity16 --arm "server F32" --prompt 3 --prompt 13 [--kv-cache-type ...]` in this process (helpers/in-process-run.ts).
  const serverRun = async (runId: string, settings: Partial<LlamaCppSettings>, status: number) => {
    const result = await runInProcess(runs, runId, { suites: ["parity16"], arms: ["server F32"], prompts: [3, 13], settings });
    assert.is(result.code, status, describeRun(result));
    const run = summary(runId);
    const teacherForced = run.verdicts.find((v: { check: string }) => v.check === "teacher_forced");
    const failed = run.verdicts.filter((v: { status: string }) => v.status !== "pass").map((v: { check: string }) => v.check);
    return { settings: run.suts[0].provenance.settings, kld: teacherForced.metrics.kld_topk_mean as number, failed };
  };
  const f32 = await serverRun("server-kv-f32", {}, 0);
  // An F16 KV cache keeps the greedy ids here but moves the distribution past the F32 arm's bounds (RMS Δp 4e-4 > 1e-4).
  const f16 = await serverRun("server-kv-f16", { kvCacheType: "F16" }, 1);
  assert.equal(f16.failed, ["distribution"]);
  assert.is(f32.settings.kvCacheType, "F32", "the oracle recipe's KV type reaches the server");
  assert.is(f16.settings.kvCacheType, "F16");
  for (const [key, value] of Object.entries({ flashAttention: false, threads: 1, batchSize: 512, sequences: 2 })) {
    assert.is(f32.settings[key], value, `provenance ${key}`);
  }
  assert.ok(f32.kld !== f16.kld, `F32 and F16 KV gave the same KLD ${f32.kld}: the setting did not reach the server`);
  assert.ok(f16.kld > f32.kld, `F16 KV (${f16.kld}) should sit further from F32 goldens than F32 KV (${f32.kld})`);
});

test("a setting the server cannot honour, or any setting on a runner, is refused with one line", async () => {
  const truncating = paritySuiteWith([{ label: "srv", model: "tiny-random:F32", sut: "http", gate: "required", settings: { prompt_overflow: "truncate-left" } }], "truncating.json");
  const refused = bench(["run", "--suite", truncating, "--runs-dir", runs]);
  assert.is(refused.status, 2, refused.stdout + refused.stderr);
  assert.match(refused.stderr, /^bench: error: settings\.prompt_overflow: arm "srv": our server refuses prompts that do not fit, it cannot truncate-left \(fix: .*\)$/m);

  const runnerArm = paritySuiteWith([{ label: "tt", model: "tiny-random:F32", sut: "stdio", command: ["python3", "x.py"], gate: "required", settings: { kv_cache_type: "F16" } }], "runner-settings.json");
  // The real CLI above prints the line; the same refusals in this process (helpers/in-process-run.ts).
  const runnerRefused = await runInProcess(runs, "runner-settings", { suites: [runnerArm] });
  assert.is(runnerRefused.code, 2, describeRun(runnerRefused));
  assert.match(errorLine(runnerRefused), /arm "tt" is a runner: settings \(kv_cache_type\) cannot reach it/);

  const override = await runInProcess(runs, "runner-threads", { suites: ["parity16"], runner: ["python3", "{bench}/harness/oracle/float64/reference_forward.py", "{model}"], settings: { threads: 2 } });
  assert.is(override.code, 2, describeRun(override));
  assert.match(errorLine(override), /arm "runner" is a runner: settings \(threads\) cannot reach it/);
});

test.run();
