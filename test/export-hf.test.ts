import { test } from "uvu";
import * as assert from "uvu/assert";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { spawnSync } from "node:child_process";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { ensureFixture } from "../harness/fixtures/registry.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("export-hf");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const CHECKER = resolve(PACKAGE_ROOT, "test", "helpers", "check_hf_export.py");
const FAKE_HF = resolve(PACKAGE_ROOT, "test", "helpers", "fake_hf");

interface ExportCheck {
  architecture: string;
  model_type: string;
  header_aligned: boolean;
  metadata: Record<string, string>;
  converted: number;
  exact: number;
  mismatches: string[];
  missing_from_export: string[];
  unused_hf_tensors: string[];
}

/** Exports a fixture, then converts it back the way llama.cpp's converter would and compares with the GGUF. */
async function exportAndCheck(fixture: string): Promise<{ check: ExportCheck; config: Record<string, unknown>; directory: string }> {
  const directory = join(work.path, fixture);
  const exported = bench(["fixtures", "export-hf", fixture, directory]);
  assert.is(exported.status, 0, exported.stdout + exported.stderr);
  const checked = spawnSync("python3", [CHECKER, await ensureFixture(fixture, "F32"), directory], { encoding: "utf8" });
  assert.is(checked.status, 0, checked.stderr);
  return { check: JSON.parse(checked.stdout) as ExportCheck, config: JSON.parse(readFileSync(join(directory, "config.json"), "utf8")) as Record<string, unknown>, directory };
}

function assertRoundTrip(check: ExportCheck, fixture: string): void {
  assert.equal(check.mismatches, [], "every tensor converts back to the GGUF's values");
  assert.equal(check.missing_from_export, [], "every GGUF tensor is exported");
  assert.equal(check.unused_hf_tensors, [], "no stray tensors");
  assert.ok(check.header_aligned, "the safetensors header is 8-byte aligned");
  assert.is(check.metadata.format, "pt");
  assert.is(check.metadata.source, `${fixture}:F32`);
}

test("llama: safetensors + LlamaForCausalLM config, q/k rows back in rotate_half order, and a transformers-convention forward on them reproduces the llama.cpp goldens", async () => {
  const { check, config, directory } = await exportAndCheck("tiny-random");
  assertRoundTrip(check, "tiny-random");
  assert.is(check.exact, check.converted, "bit-exact: nothing but reordering");
  assert.equal([config.model_type, config.architectures, config.num_hidden_layers, config.head_dim, config.tie_word_embeddings], ["llama", ["LlamaForCausalLM"], 2, 64, false]);
  // The FAKE transformers computes llama the way transformers does (rotate_half RoPE on HF names):
  // if the q/k rows were left in GGUF order, this fails.
  const run = bench(["run", "--suite", "parity16", "--runner", `python3 {bench}/scripts/runners/hf_oracle.py {model} ${directory} --dtype float64`, "--prompt", "4", "--prompt", "5", "--runs-dir", runs, "--run-id", "hf-fake"], { PYTHONPATH: FAKE_HF });
  // The oracle computes from the safetensors, not the GGUF the goldens were made from: its identity is unverified (77), every other gate passes.
  assert.is(run.status, 77, run.stdout + run.stderr);
  assert.match(run.stdout, /^parity16 +runner +identity +required +SKIPPED — NOT A PASS +unverified: runner does not say which model file it loaded/m);
  assert.match(run.stdout, /^runner correctness gate: 2\/2 prompts PASS \(STRICT 2\/2;/m);
  const summary = JSON.parse(readFileSync(join(runs, "hf-fake", "summary.json"), "utf8"));
  assert.match(summary.suts[0].provenance.engine, /^hf_oracle\.py \(transformers 0\.0-FAKE, torch 0\.0-FAKE, float64\)/);
});

test("qwen35 and qwen35moe: 1 + weight norms, A_log, tiled value heads back to grouped, fused experts; configs for Qwen3_5(Moe)ForCausalLM", async () => {
  for (const fixture of ["qwen35-tiny", "qwen35moe-tiny"]) {
    const { check, config } = await exportAndCheck(fixture);
    assertRoundTrip(check, fixture);
    const moe = fixture.startsWith("qwen35moe");
    assert.is(config.model_type, moe ? "qwen3_5_moe_text" : "qwen3_5_text");
    assert.equal(config.layer_types, ["linear_attention", "linear_attention", "linear_attention", "full_attention"]);
    assert.ok(Number(config.linear_num_value_heads) > Number(config.linear_num_key_heads), "the fixture exercises the value-head reorder");
    if (moe) assert.ok(Number(config.num_experts_per_tok) > 1);
  }
});

test("gemma4 and nemotron_h_moe: proportional RoPE and per-layer heads in the config; Mamba2 pattern, A_log, grouped norm, per-expert tensors", async () => {
  const gemma = await exportAndCheck("gemma4-tiny");
  assertRoundTrip(gemma.check, "gemma4-tiny");
  assert.is(gemma.config.model_type, "gemma4_text");
  assert.equal(gemma.config.layer_types, ["sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]);
  assert.equal((gemma.config.rope_parameters as Record<string, unknown>).full_attention, { rope_type: "proportional", partial_rotary_factor: 0.25, rope_theta: 1_000_000 });
  assert.equal(gemma.config.per_layer_config, { 5: { head_dim: 128, num_key_value_heads: 1 } });
  const nemotron = await exportAndCheck("nemotron-h-moe-tiny");
  assertRoundTrip(nemotron.check, "nemotron-h-moe-tiny");
  assert.equal([nemotron.config.model_type, nemotron.config.hybrid_override_pattern], ["nemotron_h", "MEMEM*E"]);
});

test("export-hf refuses what transformers cannot express, in one line, and writes nothing", () => {
  const target = join(work.path, "copy");
  const refused = bench(["fixtures", "export-hf", "copy-4k", target]);
  assert.is(refused.status, 2);
  assert.match(refused.stderr, /rope_freqs\.weight: per-pair RoPE factors \(rope_freqs\.weight\) have no LlamaConfig equivalent/);
  assert.not.ok(existsSync(target), "no directory left behind");
  const unknown = bench(["fixtures", "export-hf", "no-such-fixture", target]);
  assert.is(unknown.status, 2);
  assert.match(unknown.stderr, /unknown fixture "no-such-fixture"/);
});

test("hf_oracle.py where transformers is missing: the hello says so and the run stops with exit 2; bad arguments are a usage error", async () => {
  const directory = join(work.path, "tiny-random");
  const run = bench(["run", "--suite", "parity16", "--runner", `python3 {bench}/scripts/runners/hf_oracle.py {model} ${directory}`, "--prompt", "0", "--runs-dir", runs, "--run-id", "hf-missing"]);
  assert.is(run.status, 2, run.stdout + run.stderr);
  assert.match(run.stderr, /hf_oracle\.py needs torch and transformers, which are not installed here/);
  const model = await ensureFixture("tiny-random", "F32");
  const noDir = spawnSync("python3", [resolve(PACKAGE_ROOT, "scripts", "runners", "hf_oracle.py"), model, join(work.path, "nothing")], { encoding: "utf8", input: "" });
  assert.match(noDir.stdout, /"error":".*nothing: no config\.json \(write the checkpoint with `bench fixtures export-hf MODEL/);
  const badDtype = spawnSync("python3", [resolve(PACKAGE_ROOT, "scripts", "runners", "hf_oracle.py"), model, directory, "--dtype", "float16"], { encoding: "utf8", input: "" });
  assert.is(badDtype.status, 2);
  assert.match(badDtype.stderr, /argument --dtype: invalid choice: 'float16'/);
});

test.run();
