import { tableFromIPC } from "apache-arrow";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SeededRandom } from "../harness/fixtures/seeded-random.js";
import { GgmlType } from "../harness/gguf/types.js";
import { NATIVE_BUILD_DIR, PACKAGE_ROOT } from "../harness/paths.js";
import { codecFor } from "../harness/quant/registry.js";
import { loadPluginHost, type NativePlugin, type TensorArg } from "../harness/sut/plugin.js";
import { buildFakePlugin, type FakeFault } from "./helpers/fake-plugin.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

// The plugin host addon and the C side of ABI v2, called directly (the harness only ever loads a
// plugin in its own host process; these plugins are the project's own, so the test may).
const work = temporaryDirectory("plugin-host");
test.after(() => work.remove());
const host = loadPluginHost();
const reference = new host.Plugin(join(NATIVE_BUILD_DIR, "Release", "bb_reference_plugin.so"));
const fakes = new Map<FakeFault, NativePlugin>();
const fake = (fault: FakeFault) => {
  if (!fakes.has(fault)) fakes.set(fault, new host.Plugin(buildFakePlugin(work.path, fault)));
  return fakes.get(fault)!;
};

/** The float32 sentinel the harness pre-fills outputs with (a NaN payload no kernel computes). */
const SENTINEL = 0x7fc0dead;
const f32 = (name: string, shape: number[], data: Float32Array): TensorArg => ({ name, dtype: GgmlType.F32, shape, data });
const i32 = (name: string, data: Int32Array): TensorArg => ({ name, dtype: 26, shape: [data.length], data });
const sentinelF32 = (length: number) => new Float32Array(new Uint32Array(length).fill(SENTINEL).buffer);
const bits = (values: Float32Array) => Array.from(new Uint32Array(values.buffer, values.byteOffset, values.length));

/** A grouped matmul problem: E = 3 Q4_K expert towers of [8, 512], four rows routed by ids, one broadcast activation row. */
function matmulProblem(ids: Int32Array, seed = 1): { inputs: TensorArg[]; y: Float32Array } {
  const random = new SeededRandom(seed);
  const [E, N, K] = [3, 8, 512];
  const w = codecFor(GgmlType.Q4_K).encode(random.normalArray(E * N * K, 1));
  return { inputs: [{ name: "w", dtype: GgmlType.Q4_K, shape: [E, N, K], data: w }, f32("a", [1, K], random.normalArray(K, 1)), i32("ids", ids)], y: sentinelF32(ids.length * N) };
}

function runMatmul(plugin: NativePlugin, ids: Int32Array): Float32Array {
  const { inputs, y } = matmulProblem(ids);
  plugin.run("matmul_bt_quant_grouped", "Q4_K:F32", inputs, [f32("y", [ids.length, 8], y)], "{}");
  return y;
}

test("the reference plugin registers every op of the contract, exports only the ABI; a pair it does not register is refused by name", () => {
  const exported = execFileSync("nm", ["-D", "--defined-only", join(NATIVE_BUILD_DIR, "Release", "bb_reference_plugin.so")], { encoding: "utf8" }).split("\n").filter((l) => / T /.test(l)).map((l) => l.split(" ").pop());
  assert.equal(exported.sort(), ["bb_last_error", "bb_op_run", "bb_op_time", "bb_ops", "bb_plugin_info_get"]);
  const ops = new Set(reference.info().ops.map((p) => p.op));
  assert.equal([...ops].sort(), ["conv1d_update", "dequantize", "embedding_gather", "gdn_decode", "l2_norm", "matmul_bt_quant_grouped", "matvec", "moe_topk", "rms_norm", "rope", "sdpa_decode", "silu_mul", "softmax", "ssd_decode"]);
  assert.is(reference.info().abiVersion, 2);
  assert.throws(() => reference.run("matmul_bt_quant_grouped", "Q4_0:F32", [], [], "{}"), /^the plugin does not register \(matmul_bt_quant_grouped, Q4_0:F32\)$/);
  const partial = fake("UNREGISTERED").info().ops.filter((p) => p.op === "matmul_bt_quant_grouped").map((p) => p.encoding);
  assert.equal(partial, ["Q4_K:F32", "Q6_K:F32", "Q8_0:F32", "Q4_K:BF16", "Q6_K:BF16", "Q8_0:BF16"]);
  assert.throws(() => fake("UNREGISTERED").run("matmul_bt_quant_grouped", "Q5_K:BF16", [], [], "{}"), /does not register \(matmul_bt_quant_grouped, Q5_K:BF16\)/);
});

test("the host checks buffers, and the plugin attributes and dtypes, before a kernel reads a byte", () => {
  const x = f32("x", [2, 4], new Float32Array(8));
  const w = f32("w", [4], new Float32Array(4));
  const y = () => f32("y", [2, 4], sentinelF32(8));
  assert.throws(() => reference.run("rms_norm", "F32:F32", [{ ...x, data: new Float32Array(7) }, w], [y()], `{"eps":1e-6}`), /^tensor x: 28 bytes; its shape of F32 takes 32$/);
  assert.throws(() => reference.run("rms_norm", "F32:F32", [x, w], [y()], `{"eps":1e-6,"epsilon":1}`), /rms_norm \(F32:F32\) failed: attribute epsilon: this op takes no such attribute/);
  assert.throws(() => reference.run("rms_norm", "F32:F32", [x, w], [y()], "{}"), /attribute eps is required/);
  assert.throws(() => reference.run("rms_norm", "F32:BF16", [x, w], [y()], `{"eps":1e-6}`), /rms_norm F32:BF16: the tensors are F32:F32/);
  assert.throws(() => runMatmul(reference, Int32Array.of(0, 3)), /ids\[1\] = 3 is not one of the 3 experts/);
  for (const [attrs, why] of [
    [`{"eps":"tiny"}`, /attribute eps: not a number/],
    [`{"eps":1e-6`, /attributes: not a flat JSON object/],
    [`[1e-6]`, /attributes: not a JSON object/],
    [`{"note":"eps \\" , \\"eps\\": 1","eps":1e-6}`, /attribute note: this op takes no such attribute/],
  ] as const) assert.throws(() => reference.run("rms_norm", "F32:F32", [x, w], [y()], attrs), why, attrs);
  const ok = y();
  reference.run("rms_norm", "F32:F32", [x, w], [ok], `{"eps":1e-6}`);
  assert.ok((ok.data as Float32Array).every((v) => v === 0), "zeros normalize to zeros once the call is well-formed");
});

test("an ABI v1 plugin is still hosted: its two kernels serve dequantize and matvec, bit for bit as the reference", () => {
  const v1 = fake("V1");
  assert.is(v1.info().abiVersion, 1);
  assert.is(v1.info().ownTimer, false);
  assert.ok(v1.info().ops.some((p) => p.op === "matvec" && p.encoding === "Q4_K:F32"));
  const blocks = codecFor(GgmlType.Q4_K).encode(new SeededRandom(3).normalArray(1024, 1));
  const decode = (plugin: NativePlugin) => {
    const y = sentinelF32(1024);
    plugin.run("dequantize", "Q4_K:F32", [{ name: "x", dtype: GgmlType.Q4_K, shape: [1024], data: blocks }], [f32("y", [1024], y)], "{}");
    return bits(y);
  };
  assert.equal(decode(v1), decode(reference));
  const matvec = (plugin: NativePlugin) => {
    const y = sentinelF32(4);
    plugin.run("matvec", "Q4_K:F32", [{ name: "w", dtype: GgmlType.Q4_K, shape: [4, 256], data: blocks }, f32("x", [256], new SeededRandom(4).normalArray(256, 1))], [f32("y", [4], y)], "{}");
    return bits(y);
  };
  assert.equal(matvec(v1), matvec(reference));
  assert.throws(() => v1.run("matvec", "Q4_K:F32", [{ name: "w", dtype: GgmlType.Q4_K, shape: [4, 256], data: blocks }], [f32("y", [4], sentinelF32(4))], "{}"), /matvec takes two inputs \(w, x\) and one output \(y\)/);
  assert.throws(() => new host.Plugin(buildFakePlugin(work.path, "ABI_3")), /the plugin was built for ABI version 3; this harness hosts versions 1 and 2/);
  // Only what is really missing is named (bb_last_error is exported by this one).
  assert.throws(() => new host.Plugin(buildFakePlugin(work.path, "NO_OPS_EXPORT")), /^the plugin declares ABI version 2 but does not export bb_ops \(bb_ops, bb_op_run and bb_last_error are all required in v2\)$/);
});

test("timing in C: a prepared call runs without re-marshalling; bb_op_time, or the host's own loop for a plugin without it", () => {
  const { inputs, y } = matmulProblem(Int32Array.of(2, 0, 1, 2));
  const prepared = reference.prepare("matmul_bt_quant_grouped", "Q4_K:F32", inputs, [f32("y", [4, 8], y)], "{}");
  prepared.run();
  assert.equal(bits(y), bits(runMatmul(reference, Int32Array.of(2, 0, 1, 2))), "the prepared call wrote the caller's array");
  const ns = prepared.timeInPlugin(2, 7);
  assert.is(ns.length, 7);
  assert.ok(ns.every((t) => t > 0 && t < 1e9), `${ns}`);
  const loop = fake("V1").timeInPlugin("matvec", "F32:F32", [f32("w", [2, 3], new Float32Array(6)), f32("x", [3], new Float32Array(3))], [f32("y", [2], sentinelF32(2))], "{}", 0, 3);
  assert.ok(loop.length === 3 && loop.every((t) => t > 0));
});

test("planted faults, seen at the kernel: each FAKE changes exactly what it claims", () => {
  const ids = Int32Array.of(2, 0, 1, 2);
  const good = runMatmul(reference, ids);
  const unwritten = runMatmul(fake("UNWRITTEN_ROW"), ids);
  assert.equal(bits(unwritten).slice(0, 24), bits(good).slice(0, 24));
  assert.equal(bits(unwritten).slice(24), new Array(8).fill(SENTINEL), "the last row keeps the caller's sentinels");
  assert.equal(bits(runMatmul(fake("EXPERT_OFF"), ids)), bits(runMatmul(reference, Int32Array.of(0, 1, 2, 0))), "expert (id + 1) mod E");

  const { inputs } = matmulProblem(ids);
  const bf16 = (plugin: NativePlugin) => {
    const y = new Uint16Array(32).fill(0x7fc1);
    plugin.run("matmul_bt_quant_grouped", "Q4_K:BF16", inputs, [{ name: "y", dtype: 30, shape: [4, 8], data: y }], "{}");
    return Array.from(y);
  };
  const once = bf16(reference);
  const twice = bf16(fake("DOUBLE_BF16"));
  assert.ok(once.every((v) => v !== 0x7fc1));
  assert.ok(twice.some((v, i) => v !== once[i]), "a second rounding moves some outputs");

  const random = new SeededRandom(5);
  const [L, D] = [16, 8];
  const sdpa = (plugin: NativePlugin, window: number) => {
    const o = sentinelF32(2 * D);
    const r = new SeededRandom(6);
    plugin.run("sdpa_decode", "F32:F32", [f32("q", [2, D], r.normalArray(2 * D, 1)), f32("k", [1, L, D], r.normalArray(L * D, 1)), f32("v", [1, L, D], r.normalArray(L * D, 1))], [f32("o", [2, D], o)], JSON.stringify({ scale: 0.35, pos: 10, window }));
    return bits(o);
  };
  assert.equal(sdpa(fake("WINDOW_OFF"), 4), sdpa(reference, 5), "window w attends like w + 1");
  assert.not.equal(sdpa(reference, 4), sdpa(reference, 5));
  assert.equal(sdpa(fake("WINDOW_OFF"), 0), sdpa(reference, 0), "no window: nothing to be off by");

  const conv = (plugin: NativePlugin) => {
    const [C, W] = [4, 4];
    const state = random.normalArray(C * (W - 1), 1);
    const y = sentinelF32(C);
    const next = sentinelF32(C * (W - 1));
    plugin.run("conv1d_update", "F32:F32", [f32("x", [C], Float32Array.of(1, 2, 3, 4)), f32("w", [C, W], new Float32Array(C * W).fill(0.5)), f32("state_in", [C, W - 1], state)], [f32("y", [C], y), f32("state_out", [C, W - 1], next)], "{}");
    return { y: bits(y), next: bits(next), state: bits(state) };
  };
  const stale = conv(fake("NO_STATE"));
  assert.equal(stale.next, stale.state, "state_out is state_in, not updated");
  const fresh = conv(reference);
  assert.not.equal(fresh.next, fresh.state);
  assert.equal(fresh.next.filter((_, i) => i % 3 === 2), bits(Float32Array.of(1, 2, 3, 4)), "the newest input ends each channel's state");
});

test("through the CLI: an ABI v1 plugin passes the v1 suite; a segfault errors its own check and a fresh host runs the next", () => {
  const runs = join(work.path, "runs");
  const v1 = bench(["run", "--suite", "quant-kernels", "--plugin", buildFakePlugin(work.path, "V1"), "--runs-dir", runs, "--run-id", "v1"]);
  assert.is(v1.status, 0, v1.stdout + v1.stderr);
  assert.match(v1.stdout, /^plugin: 10\/10 kernel cases OK$/m);
  assert.match(JSON.parse(readFileSync(join(runs, "v1", "summary.json"), "utf8")).suts[0].provenance.engine, /^fake 0 on cpu \(plugin ABI v1\)/);
  const owned = JSON.parse(readFileSync(join(PACKAGE_ROOT, "kernels", "owned-kernels.json"), "utf8"));
  delete owned.$schema;
  // The three cases alone, without the generated edge cases.
  delete owned.edges;
  const first = (op: string) => owned.cases.find((c: { op: string }) => c.op === op);
  const suite = join(work.path, "crash-then-more.json");
  writeFileSync(suite, JSON.stringify({ ...owned, name: "crash-then-more", cases: [first("matvec"), first("matvec"), first("rms_norm")] }));
  const crashed = bench(["run", "--suite", suite, "--plugin", buildFakePlugin(work.path, "CRASH"), "--runs-dir", runs, "--run-id", "crash"]);
  assert.is(crashed.status, 2, crashed.stdout + crashed.stderr);
  assert.match(crashed.stdout, /matvec +required +ERROR +1 matvec case\(s\) errored: MATVEC\(encoding=[^)]*\): the plugin exited \(SIGSEGV\).*; the SUT is gone, later cases of this check did not run/);
  assert.match(crashed.stdout, /rms_norm +required +PASS +1\/1 rms_norm cases OK/);
  assert.match(crashed.stdout, /^plugin: 1\/3 kernel cases OK, 2 not run$/m);
  const rows = JSON.parse(readFileSync(join(runs, "crash", "summary.json"), "utf8"));
  assert.is(rows.status, "complete", "the run finished and wrote its results");
});

test("an ABI v1 plugin without one tensor type (BB_UNSUPPORTED_TYPE): those cases SKIPPED by name like an unregistered pair, the others still run; exit 77", () => {
  const runs = join(work.path, "runs");
  const result = bench(["run", "--suite", "quant-kernels", "--plugin", buildFakePlugin(work.path, "V1_NO_Q6_K"), "--case", "2", "--case", "3", "--case", "7", "--case", "8", "--runs-dir", runs, "--run-id", "no-q6k"]);
  assert.is(result.status, 77, result.stdout + result.stderr);
  assert.match(result.stdout, /dequantize +required +SKIPPED — NOT A PASS +plugin kernel: dequantize \(Q6_K:F32\) failed: this plugin has no Q6_K kernel \(1\/2 dequantize cases OK, bit-exact\)$/m);
  assert.match(result.stdout, /^plugin: 2\/4 kernel cases OK, 2 not run$/m);
  const cells = tableFromIPC(readFileSync(join(runs, "no-q6k", "cells.arrow"))).toArray().map((row) => row.toJSON());
  assert.equal(cells.map((c) => [c.check, c.status, c.reproduce.replace(/--plugin ".*"/, "--plugin P")]), [
    ["dequantize", "pass", "bench run --suite quant-kernels --plugin P --case 2"],
    ["dequantize", "skip", "bench run --suite quant-kernels --plugin P --case 3"],
    ["matvec", "pass", "bench run --suite quant-kernels --plugin P --case 7"],
    ["matvec", "skip", "bench run --suite quant-kernels --plugin P --case 8"],
  ]);
});

test.run();
