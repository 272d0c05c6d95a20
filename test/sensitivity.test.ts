import { test } from "uvu";
import * as assert from "uvu/assert";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tensorNamed } from "../harness/fixtures/architecture.js";
import { buildTinyRandom } from "../harness/fixtures/tiny-random.js";
import { gguf } from "../harness/gguf/write.js";
import { PACKAGE_ROOT } from "../harness/paths.js";
import type { GateVerdict } from "../harness/results/types.js";
import { distributionMargin, formatMargin } from "../scripts/sensitivity/margin.js";
import { faultedTinyRandom, ropeBase, swapTokenRows, weightNoise, zeroHead } from "../scripts/sensitivity/faulted-models.js";
import { CLI_HANG_GUARD_MS, temporaryDirectory, withoutForceColor } from "./helpers/workspace.js";

const work = temporaryDirectory("sensitivity");
test.after(() => work.remove());

const clean = buildTinyRandom();
const delta = (name: string, faulted: ReturnType<typeof faultedTinyRandom>): Float32Array => {
  const a = tensorNamed(clean.tensors, name).values;
  return tensorNamed(faulted.tensors, name).values.map((v, i) => v - a[i]);
};
const rms = (values: Float32Array): number => Math.sqrt(values.reduce((s, v) => s + v * v, 0) / values.length);

test("FAKE weight noise has the asked size relative to the tensor's RMS, on the named tensors only, and leaves the clean build untouched", () => {
  const faulted = faultedTinyRandom({ name: "noise", tensors: weightNoise(["blk.1.attn_q.weight"], 0.1) });
  const ratio = rms(delta("blk.1.attn_q.weight", faulted)) / rms(tensorNamed(clean.tensors, "blk.1.attn_q.weight").values);
  assert.ok(Math.abs(ratio - 0.1) < 0.005, `noise RMS ratio ${ratio}`);
  assert.is(rms(delta("blk.0.attn_q.weight", faulted)), 0);
  assert.is(rms(delta("blk.1.attn_q.weight", faultedTinyRandom({ name: "none" }))), 0, "each fault starts from a fresh clean build");
  assert.is(faulted.name, "tiny-random-FAKE-noise");
});

test("a zeroed head clears exactly its 64 input columns of attn_output; swapped token rows trade places; a metadata override replaces the key or is refused", () => {
  const head = faultedTinyRandom({ name: "head", tensors: zeroHead(1, 3) });
  const output = tensorNamed(head.tensors, "blk.1.attn_output.weight");
  const zeros = output.values.filter((v) => v === 0).length;
  assert.is(zeros, 64 * 256);
  assert.ok(output.values.subarray(3 * 64, 4 * 64).every((v) => v === 0) && output.values[0] !== 0);
  const swapped = faultedTinyRandom({ name: "rows", tensors: swapTokenRows("token_embd.weight", 10, 20) });
  const before = tensorNamed(clean.tensors, "token_embd.weight").values;
  const after = tensorNamed(swapped.tensors, "token_embd.weight").values;
  assert.equal([...after.subarray(10 * 256, 11 * 256)], [...before.subarray(20 * 256, 21 * 256)]);
  assert.equal([...after.subarray(20 * 256, 21 * 256)], [...before.subarray(10 * 256, 11 * 256)]);
  const rope = faultedTinyRandom({ name: "rope", hyperparameters: ropeBase(10500) });
  assert.equal(rope.hyperparameters.find(([key]) => key === "rope.freq_base")?.[1], gguf.f32(10500));
  assert.throws(() => faultedTinyRandom({ name: "typo", hyperparameters: { "rope.freq_bas": gguf.f32(1) } }), /tiny-random has no hyper-parameter rope\.freq_bas/);
});

test("npm run sensitivity (one family, no clean runs): runs bench run on the FAKE model, reads its verdicts and writes the Markdown table", () => {
  const out = join(work.path, "table");
  const result = spawnSync(process.execPath, [join(PACKAGE_ROOT, "dist", "scripts", "sensitivity.js"), "--only", "norm weights", "--clean-runs", "0", "--prompts", "4", "--out-dir", out], {
    cwd: PACKAGE_ROOT, encoding: "utf8", env: withoutForceColor(process.env), timeout: CLI_HANG_GUARD_MS,
  });
  assert.is(result.status, 0, result.stderr);
  const table = readFileSync(join(out, "sensitivity.md"), "utf8");
  assert.match(table, /^\| norm weights dropped \| FAIL \| all norms \| [a-z_]+.* \| all norms: caught by /m);
  assert.match(table, /Clean runs: none \(--clean-runs 0\)\./);
  assert.is(result.stdout.split("\n\nwritten to")[0].trim(), table.trim());
});

test("behind identity: the reference runner on tiny-random's own file with RoPE base +0.1% (BENCH_REFERENCE_FAULT) passes identity and is caught by the distribution check, with its margin", () => {
  const out = join(work.path, "behind");
  const result = spawnSync(process.execPath, [join(PACKAGE_ROOT, "dist", "scripts", "sensitivity.js"), "--only", "llama: rope_base", "--clean-runs", "0", "--out-dir", out], {
    cwd: PACKAGE_ROOT, encoding: "utf8", env: withoutForceColor(process.env), timeout: CLI_HANG_GUARD_MS,
  });
  assert.is(result.status, 0, result.stderr);
  const table = readFileSync(join(out, "sensitivity.md"), "utf8");
  assert.match(table, /^\| llama: rope_base \| PASS \| \+0\.1% \| distribution \| (⚠ )?[\d.]+× max_[a-z_0-9]+ .*\| \+0\.1%: caught by distribution, KLD [\d.]+e-\d+ \|$/m);
  const run = JSON.parse(readFileSync(join(out, "runs", "r002", "summary.json"), "utf8")) as { verdicts: GateVerdict[] };
  assert.equal(run.verdicts.filter((v) => v.check === "identity").map((v) => v.status), ["pass"], "the fault sits behind identity: the runner loaded the goldens' own file");
  assert.equal(run.verdicts.find((v) => v.check === "distribution")?.status, "fail");
});

test("a sized fault the family cannot carry is refused by the runner (exit 2, naming the variable and the fault), never run as a clean model", () => {
  const result = spawnSync(process.execPath, [join(PACKAGE_ROOT, "bin", "bench.js"), "run", "--suite", "parity16", "--runner", "python3 {bench}/harness/oracle/float64/reference_forward.py {model}", "--prompt", "0", "--prompt", "1", "--runs-dir", join(work.path, "refused")], {
    cwd: PACKAGE_ROOT, encoding: "utf8", env: { ...withoutForceColor(process.env), BENCH_REFERENCE_FAULT: "ssm_decay:1.1" }, timeout: CLI_HANG_GUARD_MS,
  });
  assert.is(result.status, 2, result.stdout + result.stderr);
  assert.match(result.stderr, /BENCH_REFERENCE_FAULT: ssm_decay does not apply to llama/);
});

test("the margin is the widest failed bound's ratio (misses over allowed misses for a min_ bound), a warning within 25% of its bound", () => {
  const verdict = (metrics: Record<string, number>, status: "pass" | "fail" = "fail"): GateVerdict => ({ suite: "s", arm: "a", check: "distribution", gate: "required", status, summary: "", metrics });
  const thin = distributionMargin(verdict({ max_rms_delta_p: 1e-4, max_rms_delta_p_measured: 1.08e-4, max_kld_mean: 1e-6, max_kld_mean_measured: 5e-7 }));
  assert.equal(thin && { bound: thin.bound, warning: thin.warning }, { bound: "max_rms_delta_p", warning: true });
  assert.match(formatMargin(thin), /^⚠ 1\.08× max_rms_delta_p \(within 25% of the bound\)$/);
  const wide = distributionMargin(verdict({ max_kld_mean: 1e-6, max_kld_mean_measured: 3e-6, min_top1: 0.99, min_top1_measured: 0.9 }));
  assert.equal(wide && [wide.bound, +wide.ratio.toFixed(6), wide.warning], ["min_top1", 10, false]);
  assert.is(distributionMargin(verdict({ max_kld_mean: 1e-6, max_kld_mean_measured: 3e-6 }, "pass")), undefined, "a passing verdict caught nothing");
});

test("npm run sensitivity -- --kernels (one fault, a two-case suite): the FAKE plugin runs through bench run --plugin, and the table names the case that caught it and its ratio", () => {
  const suite = join(work.path, "two-softmax.json");
  writeFileSync(suite, JSON.stringify({
    name: "two-softmax", kind: "kernels",
    cases: [{ op: "softmax", encoding: "F32:F32", R: 2, N: 64, scale: 0.5, seed: 1 }, { op: "softmax", encoding: "F32:F32", R: 2, N: 64, scale: 40, seed: 2 }],
    arms: [{ label: "reference plugin", plugin: "{bench}/native/build/Release/bb_reference_plugin.so", gate: "required" }],
  }));
  const out = join(work.path, "kernel-table");
  const result = spawnSync(process.execPath, [join(PACKAGE_ROOT, "dist", "scripts", "sensitivity.js"), "--kernels", "--only", "NO_MAX_SUB", "--kernel-suite", suite, "--out-dir", out], {
    cwd: PACKAGE_ROOT, encoding: "utf8", env: withoutForceColor(process.env), timeout: CLI_HANG_GUARD_MS,
  });
  assert.is(result.status, 0, result.stderr);
  const table = readFileSync(join(out, "sensitivity.md"), "utf8");
  assert.match(table, /^\| NO_MAX_SUB \| softmax without max subtraction \| 1\/2 \| 1 \| `SOFTMAX\(encoding=F32:F32,R=2,N=64,scale=40,seed=2\)`: y\[\d+,\d+\]: expected [\d.e+-]+, got NaN; ratio ∞ of the softmax bound \|$/m);
  assert.match(table, /^Command: `npm run sensitivity -- --kernels --only NO_MAX_SUB --kernel-suite /m);
});

test.run();
