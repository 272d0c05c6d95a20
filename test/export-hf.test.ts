import { test } from "uvu";
import * as assert from "uvu/assert";
import { cpSync, existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
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
async function exportAndCheck(fixture: string): Promise<{ check: ExportCheck; config: Record<string, unknown>; configText: string; directory: string }> {
  const directory = join(work.path, fixture);
  const exported = bench(["fixtures", "export-hf", fixture, directory]);
  assert.is(exported.status, 0, exported.stdout + exported.stderr);
  const checked = spawnSync("python3", [CHECKER, await ensureFixture(fixture, "F32"), directory], { encoding: "utf8" });
  assert.is(checked.status, 0, checked.stderr);
  const configText = readFileSync(join(directory, "config.json"), "utf8");
  const config = JSON.parse(configText) as Record<string, unknown>;
  // transformers 5 names the weights' dtype `dtype`; `torch_dtype` is unknown to its config classes.
  assert.equal([config.dtype, "torch_dtype" in config], ["float32", false]);
  return { check: JSON.parse(checked.stdout) as ExportCheck, config, configText, directory };
}

/** hf_oracle.py's from_pretrained options for an exported directory. */
function experts(directory: string): unknown {
  const run = spawnSync("python3", ["-c", "import json, sys; from hf_oracle import experts_option; print(json.dumps(experts_option(sys.argv[1])))", directory], { encoding: "utf8", env: { ...process.env, PYTHONPATH: resolve(PACKAGE_ROOT, "scripts", "runners") } });
  assert.is(run.status, 0, run.stderr);
  return JSON.parse(run.stdout);
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
    const { check, config, directory } = await exportAndCheck(fixture);
    assertRoundTrip(check, fixture);
    const moe = fixture.startsWith("qwen35moe");
    assert.is(config.model_type, moe ? "qwen3_5_moe_text" : "qwen3_5_text");
    assert.equal(config.layer_types, ["linear_attention", "linear_attention", "linear_attention", "full_attention"]);
    // transformers 5.17 has no float64 grouped_mm for experts: hf_oracle.py runs MoE experts on the eager loop.
    assert.equal(experts(directory), moe ? { experts_implementation: "eager" } : {});
    assert.is("intermediate_size" in config, !moe, "Qwen3_5MoeTextConfig has no dense FFN size");
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
  // Gemma4TextConfig is a strict dataclass: a whole-number float written as `30` is an int there, and refused.
  assert.match(gemma.configText, /"final_logit_softcapping": 30\.0,/);
  assert.match(gemma.configText, /"rope_theta": 1000000\.0/);
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

test("hf_oracle.py refuses a checkpoint with a tensor transformers cannot place (transformers only warns and leaves it random)", () => {
  const directory = join(work.path, "tiny-random-renamed");
  cpSync(join(work.path, "tiny-random"), directory, { recursive: true });
  const file = join(directory, "model.safetensors");
  const bytes = readFileSync(file);
  const headerLength = Number(bytes.readBigUInt64LE(0));
  // Same length, so every offset stays right: only the name changes.
  const header = bytes.subarray(8, 8 + headerLength).toString("latin1").replace('"model.norm.weight"', '"model.norx.weight"');
  bytes.write(header, 8, "latin1");
  writeFileSync(file, bytes);
  const run = bench(["run", "--suite", "parity16", "--runner", `python3 {bench}/scripts/runners/hf_oracle.py {model} ${directory}`, "--prompt", "4", "--runs-dir", runs, "--run-id", "hf-renamed"], { PYTHONPATH: FAKE_HF });
  assert.is(run.status, 2, run.stdout + run.stderr);
  assert.match(run.stderr, /the checkpoint does not match FakeLlamaForCausalLM: 1 missing keys \(model\.norm\.weight\); 1 unexpected keys \(model\.norx\.weight\)/);
});

test("device check: the bundle runs hf_oracle.py without Node, its session file replays into `bench run`, and a request it never saw is an error, never an answer", () => {
  const bundle = join(work.path, "bundle");
  const out = join(work.path, "device-out");
  const prepared = spawnSync("bash", [resolve(PACKAGE_ROOT, "scripts", "device", "prepare-hf-oracle-check.sh"), bundle, "tiny-random"], { encoding: "utf8" });
  assert.is(prepared.status, 0, prepared.stderr);
  // The vocabulary-only GGUF: header and metadata, no tensor data.
  assert.ok(statSync(join(bundle, "families", "tiny-random", "model.gguf")).size < 64 * 1024);
  const checked = spawnSync("bash", [join(bundle, "hf-oracle-check.sh"), out, "--prompts", "4"], { encoding: "utf8", env: { ...process.env, PYTHONPATH: FAKE_HF } });
  assert.is(checked.status, 0, checked.stdout + checked.stderr);
  assert.match(checked.stdout, /^transformers 0\.0-FAKE$/m);
  assert.match(checked.stdout, /^tiny-random: greedy exact 1\/1, teacher-forced top-1 16\/16, max \|Δ log p\| [0-9.]+ mnats/m);
  const session = join(out, "tiny-random.session.jsonl");
  const replayRunner = `python3 {bench}/scripts/runners/recorded_session.py replay ${session}`;
  const replayed = bench(["run", "--suite", "parity16", "--runner", replayRunner, "--prompt", "4", "--runs-dir", runs, "--run-id", "hf-replay"]);
  assert.is(replayed.status, 77, replayed.stdout + replayed.stderr);
  assert.match(replayed.stdout, /^runner correctness gate: 1\/1 prompts PASS \(STRICT 1\/1;/m);
  assert.match(replayed.stdout, /^parity16 +runner +determinism +required +PASS/m);
  const unrecorded = bench(["run", "--suite", "parity16", "--runner", replayRunner, "--prompt", "5", "--runs-dir", runs, "--run-id", "hf-replay-other"]);
  assert.not.equal(unrecorded.status, 0);
  assert.match(unrecorded.stdout + unrecorded.stderr, /no answer recorded for this tokenize request \(record the session again\)/);
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
