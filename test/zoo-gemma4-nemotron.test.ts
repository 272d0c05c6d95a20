import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureFixture } from "../harness/fixtures/registry.js";
import { FIRST_CHARACTER_ID } from "../harness/fixtures/char-vocab.js";
import { encodeFixtureGguf, tensorNamed } from "../harness/fixtures/architecture.js";
import { buildGemma4, GEMMA4_SHAPE } from "../harness/fixtures/families/gemma4.js";
import { buildNemotronHMoe } from "../harness/fixtures/families/nemotron-h-moe.js";
import { goldensDir, readGoldens } from "../harness/goldens/goldens.js";
import { validateLlamaMetadata } from "../harness/gguf/llama-metadata.js";
import { modelConfigDifferences } from "../harness/parity/model-config-diff.js";
import { readGguf } from "../harness/gguf/read.js";
import { GgmlType, GgufValueType } from "../harness/gguf/types.js";
import { gguf } from "../harness/gguf/write.js";
import { describeRun, runInProcess } from "./helpers/in-process-run.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";
import { assertFixturesMatchPins, type FixturePins } from "./helpers/fixture-pins.js";

const work = temporaryDirectory("zoo-gemma4-nemotron");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const cache = join(work.path, "cache");

/** Pinned like tiny-random: a change here is a fixture change (bump FIXTURE_BUILDER_VERSION, re-make the zoo goldens). */
const PINNED_SHA256: FixturePins = {
  "gemma4-tiny": {
    F32: "867d35fa2a9c13ba6d0009347a4c4794d9bdefd55569fc03ebb458f5cbfba836",
    Q8_0: "1580df0ce34050996bdfa62c463ff25a171ff1a02b583a2bc87aa2f00f76f307",
    Q4_K: "007efc0e0fb2809c470eedafaca1e8ff607b51b0f3771652a6fd899ee73ae324",
    Q5_K: "93d9369bf666b4d17afdfb55e837f68f4595072d8579780c73fee709297b9c5c",
    Q6_K: "6f7654e1182403c2817a417e7bcc4a00e3d6d48904fe78faf94fa01cd2694df1",
  },
  "nemotron-h-moe-tiny": {
    F32: "bb4f69d3ae1ce24fe900b65258ea8c256ed00246261cd28cce6cbffc1ad6659b",
    Q8_0: "61caee7a79dc9af41c977adebcd42063786df968fef9919d2236130ec5a6df9e",
    Q4_K: "5c442cce387e3c4db952abd7e2db64f1ddeac4eabfd01b5e22a59bd9208884a5",
    Q5_K: "44337b01756c29f1925220acb15a5373f76288937c9d0fd8a4c225475ac9e51d",
    Q6_K: "cbcd67b20edbfc55b592f242ca187a3bb47024e171fc9e80e030e1137b8b3516",
  },
};

test("gemma4 and nemotron_h_moe fixtures built in a fresh cache match their pinned sha256", async () => {
  await assertFixturesMatchPins(PINNED_SHA256, cache);
});

test("gemma4-tiny: five sliding layers then a global one, the window shorter than every parity prompt plus its continuation", async () => {
  const file = readGguf(await ensureFixture("gemma4-tiny", "Q4_K", cache));
  const meta = (key: string) => file.metadata.get(`gemma4.${key}`)?.value;
  assert.is(file.metadata.get("general.architecture")?.value, "gemma4");
  assert.equal(meta("attention.sliding_window_pattern"), [true, true, true, true, true, false]);
  assert.equal(meta("attention.head_count_kv"), [2, 2, 2, 2, 2, 1]);
  assert.is(meta("attention.key_length_swa"), 64);
  assert.is(meta("attention.key_length"), 128);
  assert.is(meta("final_logit_softcapping"), 30);
  const dims = (name: string) => file.tensors.find((t) => t.name === name)?.dims;
  assert.equal(dims("blk.0.attn_q.weight"), [256, 256]);
  assert.equal(dims("blk.5.attn_q.weight"), [256, 512], "global heads are twice as wide");
  assert.equal(dims("blk.5.attn_output.weight"), [512, 256]);
  const type = (name: string) => file.tensors.find((t) => t.name === name)?.type;
  assert.is(type("blk.5.attn_output.weight"), GgmlType.Q4_K);
  for (const name of ["rope_freqs.weight", "blk.0.attn_q_norm.weight", "blk.0.layer_output_scale.weight", "blk.5.post_ffw_norm.weight"]) assert.is(type(name), GgmlType.F32, name);
  // Proportional rope on the global layer: a quarter of the pairs rotate, the rest are frozen by a 1e30 factor.
  const factors = tensorNamed(buildGemma4().tensors, "rope_freqs.weight").values;
  assert.is(factors.length, 64);
  assert.is(factors.filter((f) => f === 1).length, 16);
  assert.ok(factors.slice(16).every((f) => f > 1e29));

  const window = meta("attention.sliding_window") as number;
  assert.is(window, GEMMA4_SHAPE.slidingWindow);
  const goldens = readGoldens(goldensDir("gemma4-tiny.F32", "zoo"));
  goldens.promptIds.forEach((ids, p) => assert.ok(ids.length + goldens.manifest.T > window, `prompt ${p}: ${ids.length} + ${goldens.manifest.T} tokens do not cross the ${window}-token window`));
});

test("gemma4 window faults change only attention.sliding_window (weights identical to the clean fixture)", () => {
  const clean = buildGemma4();
  for (const [fault, window] of [["window-plus-one", 17], ["window-minus-one", 15]] as const) {
    const faulty = buildGemma4(fault);
    assert.equal(faulty.tensors.map((t) => [t.name, Buffer.from(t.values.buffer).toString("base64")]), clean.tensors.map((t) => [t.name, Buffer.from(t.values.buffer).toString("base64")]), fault);
    const differing = faulty.hyperparameters.filter(([key, value], i) => JSON.stringify(value) !== JSON.stringify(clean.hyperparameters[i][1]) || key !== clean.hyperparameters[i][0]);
    assert.equal(differing, [["attention.sliding_window", gguf.u32(window)]], fault);
  }
});

test("nemotron-h-moe-tiny: llama.cpp's per-layer rule gives Mamba2 / attention / MoE in Nano's order; the quantized file keeps routers, conv, norms and A/D in F32", async () => {
  const file = readGguf(await ensureFixture("nemotron-h-moe-tiny", "Q4_K", cache));
  const perLayer = (key: string) => file.metadata.get(`nemotron_h_moe.${key}`)?.value as number[];
  const ff = perLayer("feed_forward_length");
  const kv = perLayer("attention.head_count_kv");
  // llama.cpp (nemotron-h.cpp): recurrent iff head_count_kv = 0 and feed_forward_length = 0; attention iff feed_forward_length = 0.
  const kinds = ff.map((n, i) => (n === 0 && kv[i] === 0 ? "M" : n === 0 ? "*" : "E")).join("");
  assert.is(kinds, "MEMEM*E");
  const type = (name: string) => file.tensors.find((t) => t.name === name)?.type;
  for (const name of ["blk.1.ffn_gate_inp.weight", "blk.0.ssm_conv1d.weight", "blk.0.ssm_norm.weight", "blk.0.ssm_a", "blk.0.ssm_d", "blk.1.exp_probs_b.bias"]) {
    assert.is(type(name), GgmlType.F32, name);
  }
  for (const name of ["blk.0.ssm_in.weight", "blk.0.ssm_out.weight", "blk.1.ffn_up_exps.weight", "blk.1.ffn_down_exps.weight", "blk.5.attn_q.weight"]) {
    assert.is(type(name), GgmlType.Q4_K, name);
  }
  assert.equal(file.tensors.find((t) => t.name === "blk.0.ssm_in.weight")?.dims, [256, 2 * 256 + 2 * 2 * 32 + 8], "z | x B C | dt");
  assert.equal(file.tensors.find((t) => t.name === "blk.1.ffn_down_exps.weight")?.dims, [256, 256, 8]);
  assert.ok(tensorNamed(buildNemotronHMoe().tensors, "blk.0.ssm_a").values.every((a) => a < 0), "A is stored negative, as the converter writes -exp(A_log)");
});

test("nemotron-h-moe-tiny's routers spread tokens over many expert pairs (each MoE router on the RMS-normed character embeddings, sigmoid + selection bias)", () => {
  const model = buildNemotronHMoe();
  const d = 256;
  const experts = 8;
  const embeddings = tensorNamed(model.tensors, "token_embd.weight").values;
  for (const layer of [1, 3, 6]) {
    const router = tensorNamed(model.tensors, `blk.${layer}.ffn_gate_inp.weight`).values;
    const bias = tensorNamed(model.tensors, `blk.${layer}.exp_probs_b.bias`).values;
    const pairs = new Set<string>();
    for (let id = FIRST_CHARACTER_ID; id < model.vocab.tokens.length; id++) {
      const x = embeddings.subarray(id * d, (id + 1) * d);
      const rms = Math.sqrt(x.reduce((sum, v) => sum + v * v, 0) / d);
      const scores = Array.from({ length: experts }, (_, e) => 1 / (1 + Math.exp(-x.reduce((sum, v, i) => sum + (v / rms) * router[e * d + i], 0))) + bias[e]);
      const [first, second] = scores.map((score, e) => [score, e] as const).sort((a, b) => b[0] - a[0]);
      pairs.add([first[1], second[1]].sort().join("+"));
    }
    // 28 pairs exist; a router that collapsed onto a few experts would hardly change its choice.
    assert.ok(pairs.size >= 15, `layer ${layer}: ${pairs.size} distinct top-2 pairs`);
  }
});

test("metadata validation takes per-layer arrays (hybrid families) and refuses malformed ones with the key and the fix", async () => {
  const path = await ensureFixture("nemotron-h-moe-tiny", "F32", cache);
  const hyper = validateLlamaMetadata(readGguf(path), path);
  assert.is(hyper.feedForwardLength, 256);
  assert.is(hyper.headCountKv, 2);
  const model = buildNemotronHMoe();
  const broken = (key: string, value: ReturnType<typeof gguf.array>) => {
    const file = join(work.path, `broken-${key}.gguf`);
    writeFileSync(file, encodeFixtureGguf({ ...model, hyperparameters: model.hyperparameters.map(([k, v]) => [k, k === key ? value : v] as const) }, GgmlType.F32));
    try {
      validateLlamaMetadata(readGguf(file), file);
      return "accepted";
    } catch (error) {
      return (error as Error).message;
    }
  };
  assert.match(broken("feed_forward_length", gguf.array(GgufValueType.UINT32, [0, 256, 0])), /per-layer array must hold 7 non-negative integers/);
  assert.match(broken("feed_forward_length", gguf.array(GgufValueType.UINT32, [0, 0, 0, 0, 0, 0, 0])), /per-layer array is all zeros \(llama\.cpp would abort the process\)/);
});

test("zoo: gemma4 and nemotron_h_moe F32 arms STRICT 16/16 through embedded llama.cpp and through our server, batch invariance PASS at B = 16, exit 0", async () => {
  const arms = ["gemma4 F32", "gemma4 server F32", "nemotron_h_moe F32", "nemotron_h_moe server F32"];
  // In this process (helpers/in-process-run.ts): the families' parity is what is tried here, not the CLI.
  const result = await runInProcess(runs, "clean", { suites: ["zoo"], arms });
  assert.is(result.code, 0, describeRun(result));
  for (const arm of arms) {
    assert.match(result.summaryLines.join("\n"), new RegExp(`^${arm} correctness gate: 16/16 prompts PASS \\(STRICT 16/16; near-tie-band only 0/16; max gap 0\\.000 nats; 0 forward-divergent\\)$`, "m"));
  }
  const verdicts: Array<{ arm: string; check: string; status: string; metrics: { batch: number; forward_divergent: number } }> = JSON.parse(readFileSync(join(runs, "clean", "summary.json"), "utf8")).verdicts;
  const batch = verdicts.filter((v) => v.check === "batch_invariance");
  assert.equal(batch.map((v) => v.arm), arms);
  assert.ok(batch.every((v) => v.status === "pass" && v.metrics.batch === 16 && v.metrics.forward_divergent === 0), JSON.stringify(batch));
});

for (const [fixture, window] of [["gemma4-tiny-window-plus-one", 17], ["gemma4-tiny-window-minus-one", 15]] as const) {
  test(`planted fault ${fixture}: greedy parity against gemma4's goldens is FORWARD-DIVERGENT and names the window, exit 1`, async () => {
    const result = await runInProcess(runs, fixture, { suites: ["zoo"], arms: ["gemma4 F32"], model: fixture });
    assert.is(result.code, 1, describeRun(result));
    assert.match(result.summaryLines.join("\n"), new RegExp(`^gemma4 F32 on ${fixture} correctness gate: \\d+/16 prompts PASS .*[1-9]\\d* forward-divergent\\)$`, "m"));
    const verdicts: Array<{ check: string; status: string; summary: string }> = JSON.parse(readFileSync(join(runs, fixture, "summary.json"), "utf8")).verdicts;
    const greedy = verdicts.find((v) => v.check === "greedy_parity");
    assert.is(greedy?.status, "fail");
    assert.match(greedy!.summary, new RegExp(`the SUT's model file differs from the oracle's in gemma4\\.attention\\.sliding_window ${window} \\(oracle 16\\)$`));
  });
}

test("model config differences: none for a quantized twin, the changed keys for another configuration", async () => {
  const f32 = await ensureFixture("gemma4-tiny", "F32", cache);
  assert.equal(modelConfigDifferences(await ensureFixture("gemma4-tiny", "Q4_K", cache), f32), []);
  assert.equal(modelConfigDifferences(await ensureFixture("gemma4-tiny-window-minus-one", "F32", cache), f32), ["gemma4.attention.sliding_window 15 (oracle 16)"]);
  const other = modelConfigDifferences(await ensureFixture("nemotron-h-moe-tiny", "F32", cache), f32);
  assert.ok(other.includes("gemma4.attention.sliding_window absent (oracle 16)"), other.join("\n"));
  assert.ok(other.includes("nemotron_h_moe.ssm.state_size 32 (oracle absent)"), other.join("\n"));
});

test("slot poisoning (FAULT skip-slot-clear) on nemotron_h_moe: parity, determinism and batch invariance (B = 16) through our server all FAIL, exit 1", () => {
  const result = bench(["run", "--suite", "zoo", "--arm", "nemotron_h_moe server F32", "--runs-dir", runs, "--run-id", "poisoned"], { BENCH_SERVER_FAULT: "skip-slot-clear" });
  assert.is(result.status, 1, result.stdout + result.stderr);
  const verdicts: Array<{ check: string; status: string; summary: string; metrics: { batch?: number } }> = JSON.parse(readFileSync(join(runs, "poisoned", "summary.json"), "utf8")).verdicts;
  const verdict = (check: string) => verdicts.find((v) => v.check === check);
  assert.is(verdict("greedy_parity")?.status, "fail");
  assert.is(verdict("determinism")?.status, "fail");
  assert.match(verdict("determinism")!.summary, /state leaking from earlier requests \(a reused slot/);
  assert.is(verdict("batch_invariance")?.status, "fail");
  assert.is(verdict("batch_invariance")?.metrics.batch, 16);
});

test.run();
