import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tableFromIPC } from "apache-arrow";
import { BenchError } from "../harness/errors.js";
import { loadSuite } from "../harness/suites/load.js";
import type { KernelSuite } from "../harness/suites/kernel-suite.js";
import { caseNameOfLine, scoreKernelCase } from "../harness/kernels/score.js";
import { float32DotEnvelope, FLOAT32_UNIT_ROUNDOFF } from "../kernels/envelopes.js";
import { buildCase, caseEncoding, caseName, KERNEL_OPS } from "../kernels/ops/registry.js";
import { float32Tensor, sentinelFilled } from "../kernels/ops/tensor.js";
import { parseEncoding, type KernelProblem } from "../kernels/ops/op.js";
import { edgeCases } from "../kernels/edge-cases.js";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { rankExperts } from "../kernels/ops/moe-topk.js";
import { kernelPairsFromHello } from "../harness/sut/kernel-wire.js";
import { ACCUMULATION_UNIT_ROUNDOFF } from "../harness/sut/types.js";
import type { RunOptions } from "../harness/runner/run-options.js";
import { buildFakePlugin, type FakeFault } from "./helpers/fake-plugin.js";
import { describeRun, runInProcess, verdictRow, type InProcessRun } from "./helpers/in-process-run.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const near = (actual: number, expected: number) => assert.ok(Math.abs(actual - expected) <= 1e-12 * Math.abs(expected), `${actual} vs ${expected}`);

const work = temporaryDirectory("kernels");
test.after(() => work.remove());
const runs = join(work.path, "runs");
/** `bench run` in this process (helpers/in-process-run.ts): these tries are about kernels, not the CLI (the refusals of bad options below run the real one). */
const run = (runId: string, options: RunOptions) => runInProcess(runs, runId, options);
/** The arms' summary lines, as `bench run` prints them. */
const printed = (result: InProcessRun) => result.summaryLines.join("\n");
const cells = (runId: string) => tableFromIPC(readFileSync(join(runs, runId, "cells.arrow"))).toArray().map((row) => row.toJSON());
const summary = (runId: string) => JSON.parse(readFileSync(join(runs, runId, "summary.json"), "utf8"));
const owned = loadSuite("owned-kernels") as KernelSuite;

/** A copy of owned-kernels with some of its cases and other arms, written where the test can run it. */
function suiteWith(name: string, caseIndices: number[], arms: object[]): string {
  const path = join(work.path, `${name}.json`);
  writeFileSync(path, JSON.stringify({ name, kind: "kernels", cases: caseIndices.map((i) => owned.cases[i]), arms }));
  return path;
}
const caseIndex = (seed: number) => owned.cases.findIndex((c) => c.seed === seed);

test("owned-kernels covers every (op, encoding) of the registry; every case draws the same inputs from its seed", () => {
  const pairs = (list: readonly string[]) => [...new Set(list)].sort();
  assert.equal(pairs(owned.cases.map((c) => `${c.op} ${caseEncoding(c)}`)), pairs([...KERNEL_OPS.values()].flatMap((op) => op.encodings.map((e) => `${op.name} ${e}`))));
  const once = buildCase(owned.cases[caseIndex(122)]);
  const again = buildCase(owned.cases[caseIndex(122)]);
  assert.equal(once.inputs.map((t) => Buffer.from(t.data).toString("base64")), again.inputs.map((t) => Buffer.from(t.data).toString("base64")));
});

test("every bound admits the correctly rounded answer, underflow included: the float32 (or bf16) rounding of the exact value is never outside", () => {
  let belowSubnormals = 0;
  for (const spec of owned.cases) {
    const problem = buildCase(spec);
    const op = KERNEL_OPS.get(spec.op)!;
    op.reference(problem, { u: FLOAT32_UNIT_ROUNDOFF }).forEach((expected, i) => {
      if (expected.kind !== "bounded") return;
      const bf16 = problem.outputs[i].dtype === "BF16";
      expected.value.forEach((v, j) => {
        // float32: the rounding itself (0 for an exact value below 2⁻¹⁵⁰); bf16: its relative bound.
        const rounding = bf16 ? Math.abs(v) * 2 ** -8 : Math.abs(Math.fround(v) - v);
        if (v !== 0 && Math.fround(v) === 0) belowSubnormals++;
        // A zero bound is a copied value (rope's unrotated dims): exact, and so representable.
        assert.ok(expected.bound[j] >= rounding || (expected.bound[j] === 0 && Math.fround(v) === v), `${spec.op} seed ${spec.seed} ${problem.outputs[i].name}[${j}]: bound ${expected.bound[j]} below one rounding ${rounding}`);
      });
    });
  }
  // The edges reach float32's underflow (softmax at logit scale 40, sdpa at ×40, decays of e^−200): not a vacuous check.
  assert.ok(belowSubnormals > 100, `${belowSubnormals} exact values below float32's smallest subnormal`);
});

test("cases by construction: every edge each op declares appears once per encoding in owned-kernels, after the written cases, seeded and the same every time", () => {
  const written = (JSON.parse(readFileSync(join(PACKAGE_ROOT, "kernels", "owned-kernels.json"), "utf8")) as { cases: unknown[] }).cases.length;
  const generated = owned.cases.slice(written);
  assert.equal(generated, edgeCases({ first_seed: 1000 }));
  assert.equal(generated.map((c) => c.seed), generated.map((_, i) => 1000 + i));
  for (const op of KERNEL_OPS.values()) {
    for (const encoding of op.encodings) {
      const { base, axes } = op.edges(parseEncoding(encoding));
      for (const [axis, edges] of Object.entries(axes)) {
        for (const e of edges) {
          const want = { ...base, ...e.params };
          const found = generated.some((c) => c.op === op.name && c.encoding === encoding && Object.entries(want).every(([k, v]) => c[k] === v));
          assert.ok(found, `${op.name} ${encoding}: edge ${axis} ${e.label} has no case`);
        }
      }
    }
  }
  // The edges the issue names, by value.
  const has = (op: string, encoding: string, params: Record<string, unknown>) => generated.some((c) => c.op === op && c.encoding === encoding && Object.entries(params).every(([k, v]) => c[k] === v));
  for (const cols of [32, 64, 128, 256, 512]) assert.ok(has("matvec", "Q8_0:F32", { cols }), `Q8_0 matvec K=${cols}`);
  assert.ok(has("rms_norm", "F32:F32", { N: 16 }) && has("rms_norm", "F32:F32", { eps: 1e-2 }));
  assert.ok(has("softmax", "F32:F32", { scale: 40 }));
  assert.ok(has("sdpa_decode", "F32:F32", { window: 1 }) && has("sdpa_decode", "F32:F32", { window: 100 }));
});

test("moe_topk: ties go to the lower expert index; the generator plants ties across the k-th place, and a kernel that picks the later expert fails", () => {
  assert.equal(rankExperts([0.5, 1, 1, 0.25, 1]), [1, 2, 4, 0, 3]);
  const spec = owned.cases[caseIndex(181)];
  const problem = buildCase(spec);
  const [expectedIds, expectedWeights] = KERNEL_OPS.get("moe_topk")!.reference(problem, { u: FLOAT32_UNIT_ROUNDOFF });
  const ids = new Int32Array((expectedIds as { data: Uint8Array }).data.slice().buffer);
  const logits = new Float32Array(problem.inputs[0].data.slice().buffer);
  const [E, k] = [64, 8];
  for (const row of [0, 1]) {
    const last = ids[row * k + k - 1];
    const tied = Array.from({ length: E }, (_, e) => e).filter((e) => e > last && logits[row * E + e] === logits[row * E + last] && !ids.subarray(row * k, row * k + k).includes(e));
    assert.ok(tied.length > 0, `row ${row}: no planted tie across the k-th place`);
    if (row === 0) {
      const wrong = ids.slice();
      wrong[k - 1] = tied[0];
      const weights = Float32Array.from((expectedWeights as { value: Float64Array }).value);
      const outcome = scoreKernelCase("MOE()", problem, [expectedIds, expectedWeights], [new Uint8Array(wrong.buffer), new Uint8Array(weights.buffer)], "moe");
      assert.match(outcome.line, new RegExp(`^MOE\\(\\): FAIL \\(1/64 values differ; first at ids\\[0,7\\]: expected ${last}, got ${tied[0]}\\)$`));
    }
  }
});

test("a kernel may declare a coarser accumulation: its bounds use that unit roundoff, and a shape with no finite bound is not checked", () => {
  assert.equal(kernelPairsFromHello([{ op: "silu_mul", encoding: "F32:F32", accumulation: "bf16" }]), [{ op: "silu_mul", encoding: "F32:F32", accumulation: "bf16" }]);
  assert.throws(() => kernelPairsFromHello([{ op: "silu_mul", encoding: "F32:F32", accumulation: "fp8" }]), /kernel_ops must list \{op, encoding, accumulation\?: f32 \| bf16 \| f16\} pairs/);
  const silu = buildCase(owned.cases[caseIndex(144)]);
  const [f32] = KERNEL_OPS.get("silu_mul")!.reference(silu, { u: ACCUMULATION_UNIT_ROUNDOFF.f32 }) as readonly { bound: Float64Array }[];
  const [bf16] = KERNEL_OPS.get("silu_mul")!.reference(silu, { u: ACCUMULATION_UNIT_ROUNDOFF.bf16 }) as readonly { bound: Float64Array }[];
  near(bf16.bound[7] / f32.bound[7], 2 ** 16);
  const [dot] = KERNEL_OPS.get("matvec")!.reference(buildCase(owned.cases[caseIndex(113)]), { u: ACCUMULATION_UNIT_ROUNDOFF.bf16 }) as readonly { bound: Float64Array }[];
  assert.is(dot.bound[0], Infinity, "1024 terms at u = 2⁻⁸: γ_n has no finite value");
});

test("bad kernel cases are refused with the file and field named: unknown op, a K that is not whole blocks, a missing parameter", () => {
  const write = (c: object) => {
    const path = join(work.path, "bad.json");
    writeFileSync(path, JSON.stringify({ name: "bad", kind: "kernels", cases: [c], arms: [{ label: "p", plugin: "x.so", gate: "required" }] }));
    return path;
  };
  const refused = (c: object) => {
    try {
      loadSuite(write(c));
    } catch (error) {
      assert.instance(error, BenchError);
      return (error as BenchError).oneLine();
    }
    throw new Error("accepted a bad case");
  };
  assert.match(refused({ op: "matmul", seed: 1 }), /bad\.json: cases\.0\.op: unknown kernel op "matmul" \(fix: use one of dequantize, matvec, matmul_bt_quant_grouped/);
  assert.match(refused({ op: "matmul_bt_quant_grouped", encoding: "Q4_K:F32", E: 2, P: 2, Pa: 1, N: 8, K: 300, seed: 1 }), /cases\.0: K must be a multiple of 256 \(one Q4_K block\)/);
  assert.match(refused({ op: "rope", encoding: "F32:F32", T: 1, H: 1, D: 8, n_dims: 8, max_pos: 4, seed: 1 }), /cases\.0\.mode: required field is missing/);
  assert.match(refused({ op: "softmax", encoding: "Q4_0:F32", R: 1, N: 4, seed: 1 }), /cases\.0\.encoding: must be equal to one of the allowed values/);
});

test("the reference plugin passes every op and encoding with its ratio printed; the older quant-kernels spelling still runs", async () => {
  const result = await run("reference", { suites: ["owned-kernels", "quant-kernels"] });
  assert.is(result.code, 0, describeRun(result));
  assert.match(printed(result), new RegExp(`^reference plugin: ${owned.cases.length}/${owned.cases.length} kernel cases OK$`, "m"));
  assert.match(printed(result), /^reference plugin: 10\/10 kernel cases OK$/m);
  const ownedRow = (op: string) => verdictRow(result, op, { suite: "owned-kernels", arm: "reference plugin" });
  for (const op of KERNEL_OPS.keys()) assert.match(ownedRow(op), new RegExp(`^required pass \\d+/\\d+ ${op} cases OK`), op);
  const grouped = owned.cases.filter((c) => c.op === "matmul_bt_quant_grouped").length;
  assert.match(ownedRow("matmul_bt_quant_grouped"), new RegExp(`^required pass ${grouped}/${grouped} matmul_bt_quant_grouped cases OK, worst ratio 0\\.\\d+ of the dot\\(K\\) bound`));
  const rows = cells("reference").filter((c) => c.suite === "owned-kernels");
  assert.is(rows.length, owned.cases.length);
  // The softmax case at logit scale 40 (underflow everywhere) is among them, and passes.
  assert.ok(rows.some((c) => /^SOFTMAX\(encoding=F32:F32,R=4,N=256,scale=40,seed=\d+\): OK/.test(c.detail)));
  for (const row of rows) {
    assert.match(row.detail, /^[A-Z0-9_]+\(encoding=[^)]*seed=\d+\): OK \((.*worst ratio [\d.e-]+ of the .* bound|\d+\/\d+ values bit-exact)/);
    if (row.kernel_ratio !== null) assert.ok(row.kernel_ratio <= 1, row.detail);
    // One rounding to bf16 is most of a bf16 output's budget: a ratio near 0 would mean a loose bound.
    if (/:BF16,/.test(row.detail)) assert.ok(row.kernel_ratio > 0.2, row.detail);
  }
  assert.match(rows.find((c) => c.detail.startsWith("MOE_TOPK(encoding=F32:F32,T=8,E=64"))!.detail, /ids bit-exact; weights: worst ratio/);
  assert.match(cells("reference").find((c) => c.suite === "quant-kernels")!.detail, /^DEQUANTIZE\(type=Q8_0,values=8192,seed=1\): OK \(8192\/8192 values bit-exact\)$/);
  assert.match(summary("reference").suts[0].provenance.engine, /^bringup-bench reference .* \(plugin ABI v2\) \(runner protocol v1\)$/);
});

test("planted faults fail with one reproducible line each: double bf16 rounding, an unwritten row, an expert off by one, a window off by one, a missing state update", async () => {
  const fault = (label: string, f: FakeFault) => ({ label, plugin: buildFakePlugin(work.path, f), gate: "required" });
  const seeds = [121, 124, 127, 162, 171, 172, 173];
  const path = suiteWith("planted", seeds.map(caseIndex), [
    fault("double bf16", "DOUBLE_BF16"), fault("unwritten row", "UNWRITTEN_ROW"), fault("expert off", "EXPERT_OFF"), fault("window off", "WINDOW_OFF"), fault("no state", "NO_STATE"),
  ]);
  const result = await run("planted", { suites: [path] });
  assert.is(result.code, 1, describeRun(result));
  // A suite given by path is named by its path: the line reruns it as it stands.
  const rerun = (arm: string, index: number) => `\\[rerun: bench run --suite ${path.replace(/[.\\/]/g, "\\$&")} --arm "${arm}" --case ${index}\\]`;
  assert.match(printed(result), new RegExp(`^double bf16: 6/7 kernel cases OK\\n {2}MATMUL_BT_QUANT_GROUPED\\(encoding=Q5_K:BF16,E=8,P=6,Pa=1,N=300,K=1024,seed=124\\): FAIL \\(y\\[\\d+,\\d+\\]: expected -?[\\d.e-]+, got -?[\\d.e-]+; ratio [1-9][\\d.]* of the dot\\(K\\) bound\\)  ${rerun("double bf16", 1)}$`, "m"));
  assert.match(printed(result), new RegExp(`^ {2}MATMUL_BT_QUANT_GROUPED\\(encoding=Q8_0:F32,E=8,P=6,Pa=1,N=100,K=5120,seed=127\\): FAIL \\(y\\[5,0\\] never written \\(100/600 elements still hold the sentinel\\)\\)  ${rerun("unwritten row", 2)}$`, "m"));
  assert.match(printed(result), new RegExp(`^expert off: 4/7 kernel cases OK\\n {2}MATMUL_BT_QUANT_GROUPED\\(encoding=Q4_K:F32,.*seed=121\\): FAIL \\(y\\[\\d+,\\d+\\]: expected .*; ratio [\\d.e+]+ of the dot\\(K\\) bound\\)  ${rerun("expert off", 0)}$`, "m"));
  assert.match(printed(result), new RegExp(`^window off: 6/7 kernel cases OK\\n {2}SDPA_DECODE\\(encoding=F32:F32,H=8,Hkv=2,L=256,Dk=64,Dv=64,pos=200,window=64,seed=162\\): FAIL \\(o\\[\\d+,\\d+\\]: .* of the sdpa bound\\)  ${rerun("window off", 3)}$`, "m"));
  for (const [op, seed, index] of [["GDN_DECODE", 171, 4], ["CONV1D_UPDATE", 172, 5], ["SSD_DECODE", 173, 6]] as const) {
    assert.match(printed(result), new RegExp(`^ {2}${op}\\(encoding=F32:F32,.*seed=${seed}\\): FAIL \\((\\d+/\\d+ values differ; first at )?state_out\\[[\\d,]+\\]: expected .*\\)  ${rerun("no state", index)}$`, "m"), op);
  }
  // The line's --case reruns exactly that case and fails the same way.
  const line = cells("planted").find((c) => c.arm === "window off" && c.status === "fail")!;
  assert.is(line.reproduce, `bench run --suite ${path} --arm "window off" --case 3`);
  const again = await run("rerun", { suites: [path], arms: ["window off"], kernelCases: [3] });
  assert.is(again.code, 1);
  assert.equal(cells("rerun").map((c) => c.detail), [line.detail]);
});

/** The index in owned-kernels of the first case of `op` and `encoding` with these parameters. */
const edgeIndex = (op: string, encoding: string, params: Record<string, unknown>) => {
  const index = owned.cases.findIndex((c) => c.op === op && c.encoding === encoding && Object.entries(params).every(([k, v]) => c[k] === v));
  assert.ok(index >= 0, `no ${op} ${encoding} case with ${JSON.stringify(params)}`);
  return index;
};

test("the catalogue's faults fail a generated edge case with one reproducible line: fp16 partial sums at K = 64, ε after √ at ε = 1e-2, no max subtraction at logit scale 40, tiled heads, Dk/Dv swapped", async () => {
  const fault = (label: string, f: FakeFault) => ({ label, plugin: buildFakePlugin(work.path, f), gate: "required" });
  const indices = [
    edgeIndex("matvec", "Q8_0:F32", { cols: 64 }), edgeIndex("rms_norm", "F32:F32", { eps: 1e-2 }), edgeIndex("softmax", "F32:F32", { scale: 40 }),
    edgeIndex("sdpa_decode", "F32:F32", { H: 6, Hkv: 2 }), edgeIndex("sdpa_decode", "F32:F32", { Dk: 32, Dv: 128 }),
  ];
  const path = suiteWith("edges-planted", indices, [
    fault("fp16 partial sums", "HALF_ACCUM"), fault("eps after sqrt", "EPS_AFTER_SQRT"), fault("no max", "NO_MAX_SUB"), fault("tiled heads", "HEADS_TILED"), fault("dk dv", "DK_DV_SWAPPED"),
  ]);
  const result = await run("edges-planted", { suites: [path] });
  assert.is(result.code, 1, describeRun(result));
  const failing = (arm: string) => cells("edges-planted").filter((c) => c.arm === arm && c.status === "fail").map((c) => c.detail as string);
  assert.match(failing("fp16 partial sums").join("\n"), /^MATVEC\(encoding=Q8_0:F32,rows=16,cols=64,seed=\d+\): FAIL \(y\[\d+\]: expected .*, got .*; ratio \d[\d.e+]* of the dot\(K\) bound\)$/);
  assert.match(failing("eps after sqrt").join("\n"), /^RMS_NORM\(encoding=F32:F32,R=4,N=256,eps=0\.01,seed=\d+\): FAIL \(y\[\d+,\d+\]: .*of the rms_norm bound\)$/);
  assert.match(failing("no max").join("\n"), /^SOFTMAX\(encoding=F32:F32,R=4,N=256,scale=40,seed=\d+\): FAIL \(y\[\d+,\d+\]: expected .*, got NaN; ratio ∞ of the softmax bound\)$/);
  // Both sdpa cases group their heads (3 and 2 per kv head): tiled reads the wrong kv head in each.
  assert.equal(failing("tiled heads").map(caseNameOfLine), [caseName(owned.cases[indices[3]]), caseName(owned.cases[indices[4]])]);
  // Dk = Dv hides the swap; only the Dk ≠ Dv case catches it.
  assert.equal(failing("dk dv").map(caseNameOfLine), [caseName(owned.cases[indices[4]])]);
});

test("--op runs one op's cases; an unknown op and --runner on a kernel suite's plugin arm are refused in one line before any work", async () => {
  const softmaxCases = owned.cases.filter((c) => c.op === "softmax").length;
  const only = await run("op-filter", { suites: ["owned-kernels"], kernelOps: ["softmax"] });
  assert.is(only.code, 0, describeRun(only));
  assert.match(printed(only), new RegExp(`^reference plugin: ${softmaxCases}/${softmaxCases} kernel cases OK$`, "m"));
  assert.equal([...new Set(cells("op-filter").map((c) => c.check))], ["softmax"]);
  const typo = bench(["run", "--suite", "owned-kernels", "--op", "softmx", "--runs-dir", runs]);
  assert.is(typo.status, 2);
  assert.match(typo.stderr, /unknown kernel op "softmx" \(did you mean "softmax"\?\)/);
  const runner = bench(["run", "--suite", "owned-kernels", "--runner", "python3 nothing.py", "--runs-dir", runs]);
  assert.is(runner.status, 2);
  assert.match(runner.stderr, /--runner cannot replace kernel suite owned-kernels's plugin arm "reference plugin" \(fix: swap the plugin with --plugin LIBRARY/);
});

test("gdn_decode conventions as attributes: Dk 16, Dv 32, grouped heads, raw gating and in-kernel L2 norm pass on the reference plugin; a plugin without them SKIPs by name, a tiled one fails", async () => {
  const conventions = edgeIndex("gdn_decode", "F32:F32", { S: 16, Dv: 32, heads: "grouped", gating: "raw", qk_l2_norm: true });
  const problem = buildCase(owned.cases[conventions]);
  assert.equal(problem.inputs.map((t) => `${t.name}[${t.shape.join(",")}]`), ["q[2,16]", "k[2,16]", "v[8,32]", "a[8]", "b[8]", "A_log[8]", "dt_bias[8]", "state_in[8,32,16]"]);
  assert.equal(problem.attrs, { heads: "grouped", qk_l2_norm: true, gating: "raw" });
  const plain = caseIndex(171);
  const path = suiteWith("gdn-conventions", [plain, conventions], [
    { label: "reference", plugin: "{bench}/native/build/Release/bb_reference_plugin.so", gate: "required" },
    { label: "no conventions", plugin: buildFakePlugin(work.path, "NO_CONVENTIONS"), gate: "required" },
    { label: "tiled", plugin: buildFakePlugin(work.path, "HEADS_TILED"), gate: "required" },
  ]);
  const result = await run("gdn-conventions", { suites: [path] });
  assert.is(result.code, 1, describeRun(result));
  const statuses = (arm: string) => cells("gdn-conventions").filter((c) => c.arm === arm).map((c) => c.status);
  assert.equal(statuses("reference"), ["pass", "pass"]);
  assert.equal(statuses("no conventions"), ["pass", "skip"]);
  assert.equal(statuses("tiled"), ["pass", "fail"]);
  assert.match(verdictRow(result, "gdn_decode", { suite: "gdn-conventions", arm: "no conventions" }), /^required skip plugin kernel: gdn_decode \(F32:F32\) failed: this plugin's gdn_decode implements no attributes \(got \{"heads":"grouped","qk_l2_norm":true,"gating":"raw"\}\)/);
});

test("a pair the plugin does not register is SKIPPED by name, never passed: a required arm exits 77", async () => {
  const path = suiteWith("unregistered", [caseIndex(121), caseIndex(123), caseIndex(124)], [{ label: "partial", plugin: buildFakePlugin(work.path, "UNREGISTERED"), gate: "required" }]);
  const result = await run("unregistered", { suites: [path] });
  assert.is(result.code, 77, describeRun(result));
  assert.match(verdictRow(result, "matmul_bt_quant_grouped", { suite: "unregistered", arm: "partial" }), /^required skip partial does not register matmul_bt_quant_grouped Q5_K:F32; partial does not register matmul_bt_quant_grouped Q5_K:BF16 \(1\/3 matmul_bt_quant_grouped cases OK, worst ratio [\d.e-]+ of the dot\(K\) bound\)$/m);
  assert.equal(cells("unregistered").map((c) => c.status), ["pass", "skip", "skip"]);
  assert.match(cells("unregistered")[1].detail, /^MATMUL_BT_QUANT_GROUPED\(encoding=Q5_K:F32,.*\): SKIPPED \(partial does not register matmul_bt_quant_grouped Q5_K:F32\)$/);
});

test("kernels written in Python answer the same kernel method: the same cases, the same envelopes, unregistered pairs SKIPPED", async () => {
  const path = join(work.path, "python-kernels.json");
  writeFileSync(path, JSON.stringify({
    name: "python-kernels", kind: "kernels",
    cases: [
      { op: "matvec", encoding: "Q8_0:F32", rows: 16, cols: 256, seed: 1 },
      { op: "rms_norm", encoding: "F32:F32", R: 4, N: 512, seed: 2 },
      { op: "softmax", encoding: "F32:F32", R: 4, N: 512, scale: 0.5, seed: 3 },
      { op: "embedding_gather", encoding: "BF16:F32", V: 64, D: 32, T: 8, seed: 4 },
      { op: "rope", encoding: "F32:F32", T: 1, H: 1, D: 8, n_dims: 8, mode: "neox", max_pos: 10, seed: 5 },
    ],
    arms: [{ label: "python kernels", runner: ["python3", "{bench}/harness/oracle/float64/reference_kernels.py"], gate: "required" }],
  }));
  const result = await run("python", { suites: [path] });
  assert.is(result.code, 77, describeRun(result));
  assert.match(printed(result), /^python kernels: 4\/5 kernel cases OK, 1 not run\n {2}ROPE\(encoding=F32:F32,.*\): SKIPPED \(python kernels does not register rope F32:F32\)$/m);
  assert.match(verdictRow(result, "rms_norm"), /^required pass 1\/1 rms_norm cases OK, worst ratio/);
  assert.match(verdictRow(result, "embedding_gather"), /^required pass 1\/1 embedding_gather cases OK, bit-exact/);
  assert.match(verdictRow(result, "rope", { suite: "python-kernels", arm: "python kernels" }), /^required skip python kernels does not register rope F32:F32/);
  assert.match(summary("python").suts[0].provenance.engine, /^reference_kernels\.py/);
});

test("--time: µs/call with p10–p90, GB/s, GFLOP/s and the fraction of the copy bandwidth measured in the same run; report table and roofline; gate perf bands", async () => {
  const result = await run("timed", { suites: ["owned-kernels"], kernelCases: [caseIndex(141), caseIndex(161), caseIndex(131)], time: true });
  assert.is(result.code, 0, describeRun(result));
  assert.match(verdictRow(result, "kernel_time"), /^informational pass 3 cases timed against a copy bandwidth of [\d.]+ GB\/s \(best of 8 copies of 64 MiB\); harness medians vs the in-plugin C loop's [\d.]+% apart \(median\), within 3% for \d\/3 cases, worst [\d.]+% where p90\/p10 = [\d.]+/);
  // Each timed case's µs/call on the console and in summary.md, not only in the cells.
  const perCase = /^ {2}RMS_NORM\(encoding=F32:F32,R=8,N=2048,seed=141\): [\d.e+]+ µs\/call \(p10 [\d.e+]+, p90 [\d.e+]+, \d+ samples of \d+ calls\), [\d.e+]+ GB\/s = [\d.e+]+% of copy bandwidth, [\d.e+]+ GFLOP\/s$/m;
  assert.match(printed(result), perCase);
  assert.match(readFileSync(join(runs, "timed", "summary.md"), "utf8"), perCase);
  const verdict = summary("timed").verdicts.find((v: { check: string }) => v.check === "kernel_time");
  const copy = verdict.metrics.copy_bandwidth_gbps as number;
  assert.ok(copy > 0.1 && copy < 1000, `copy bandwidth ${copy}`);
  const timed = cells("timed").filter((row) => row.check !== "kernel_time");
  assert.is(timed.length, 3, "the three timed cases, each with its own cell");
  for (const c of timed) {
    assert.ok(c.kernel_us_p10 <= c.kernel_us_median && c.kernel_us_median <= c.kernel_us_p90, c.detail);
    assert.ok(c.kernel_in_plugin_us_median > 0, c.detail);
    near(c.kernel_bandwidth_fraction, c.kernel_gbps / copy);
    const problem = buildCase(owned.cases[owned.cases.findIndex((s) => c.detail.includes(`seed=${s.seed})`))]);
    const counts = KERNEL_OPS.get(problem.op)!.counts(problem);
    near(c.kernel_gbps, counts.bytes / (c.kernel_us_median * 1e3));
    near(c.kernel_gflops, counts.flops / (c.kernel_us_median * 1e3));
    assert.match(c.detail, /; [\d.e+]+ µs\/call \(p10 [\d.e+]+, p90 [\d.e+]+, \d+ samples of \d+ calls\), [\d.e+]+ GB\/s = [\d.e+]+% of copy bandwidth, [\d.e+]+ GFLOP\/s$/);
  }
  const out = join(work.path, "timed-report");
  assert.is(bench(["report", "timed", "--runs-dir", runs, "--out", out]).status, 0);
  const markdown = readFileSync(join(out, "report.md"), "utf8");
  assert.match(markdown, /^\| SUT arm \| verdict \| case \| ratio to bound \| µs\/call median \(p10–p90\) \| in-plugin µs \| GB\/s \| GFLOP\/s \| of copy bandwidth \|$/m);
  assert.match(markdown, /^\| reference plugin \| PASS \| RMS_NORM\(encoding=F32:F32,R=8,N=2048,seed=141\): OK \(y: worst ratio [\d.]+ of the rms_norm bound\) \| [\d.]+ \| [\d.e+]+ \([\d.e+]+–[\d.e+]+\) \| [\d.e+]+ \| [\d.]+ \| [\d.]+ \| [\d.]+% \|$/m);
  assert.match(readFileSync(join(out, "report.html"), "utf8"), /<canvas id="chart-roofline">/);
  const baseline = join(work.path, "timed-baseline.json");
  assert.is(bench(["gate", "timed", "--runs-dir", runs, "--baseline", baseline, "--update"]).status, 0);
  const data = JSON.parse(readFileSync(baseline, "utf8"));
  const key = "owned-kernels/reference plugin/RMS_NORM(encoding=F32:F32,R=8,N=2048,seed=141)/us_per_call";
  assert.is(data.perf[key].better, "lower");
  data.perf[key].target = 0.001;
  writeFileSync(baseline, JSON.stringify(data));
  const gated = bench(["gate", "timed", "--runs-dir", runs, "--baseline", baseline]);
  assert.is(gated.status, 1, gated.stdout);
  assert.match(gated.stdout, /^FAIL {2}owned-kernels\/reference plugin\/RMS_NORM\(encoding=F32:F32,R=8,N=2048,seed=141\)\/us_per_call: [\d.]+ is above the band \(lower is better\)/m);
});

test("bench gate: a kernel case that passed in the baseline may not fail later", () => {
  const baseline = join(work.path, "kernel-baseline.json");
  assert.is(bench(["gate", "reference", "--runs-dir", runs, "--baseline", baseline, "--update"]).status, 0);
  const data = JSON.parse(readFileSync(baseline, "utf8"));
  assert.is(data.kernels["owned-kernels/reference plugin/sdpa_decode"].length, owned.cases.filter((c) => c.op === "sdpa_decode").length);
  // The planted run's arm is "window off" and ran one sdpa case: hold it to the reference arm's record of that case.
  const windowed = (data.kernels["owned-kernels/reference plugin/sdpa_decode"] as string[]).filter((name) => name.includes("seed=162"));
  data.kernels = { "planted/window off/sdpa_decode": windowed };
  writeFileSync(baseline, JSON.stringify(data));
  const gated = bench(["gate", "planted", "--runs-dir", runs, "--baseline", baseline]);
  assert.is(gated.status, 1);
  assert.match(gated.stdout + gated.stderr, /^FAIL {2}planted\/window off\/sdpa_decode: kernel cases no longer pass: SDPA_DECODE\(encoding=F32:F32,H=8,Hkv=2,L=256,Dk=64,Dv=64,pos=200,window=64,seed=162\)$/m);
});

test("scorer: bit-exact outputs compare bits (−0 is not +0); bounded ones fail outside the envelope, on NaN, and on an unwritten sentinel", () => {
  const problem: KernelProblem = { op: "t", encoding: "F32:F32", inputs: [float32Tensor("x", [2], Float32Array.of(0, 1))], outputs: [sentinelFilled("y", "F32", [2])], attrs: {} };
  const bytes = (...values: number[]) => new Uint8Array(Float32Array.from(values).buffer);
  const exact = [{ kind: "exact" as const, data: bytes(0, 1) }];
  assert.is(scoreKernelCase("T()", problem, exact, [bytes(-0, 1)], "bit-exact").pass, false);
  assert.is(scoreKernelCase("T()", problem, exact, [bytes(0, 1)], "bit-exact").line, "T(): OK (2/2 values bit-exact)");
  // γ_4 · Σ|w·x| = 4u/(1 − 4u) · 4 ≈ 9.5e-7: an error of 5e-7 is inside, 2e-6 outside.
  near(float32DotEnvelope(4, 4), (4 * 2 ** -24 / (1 - 4 * 2 ** -24)) * 4);
  const bounded = [{ kind: "bounded" as const, value: Float64Array.of(1, 2), bound: Float64Array.of(float32DotEnvelope(4, 4), float32DotEnvelope(4, 4)) }];
  const inside = scoreKernelCase("T()", problem, bounded, [bytes(1, 2 + 5e-7)], "dot(K)");
  assert.ok(inside.pass && inside.ratio! > 0.4 && inside.ratio! < 0.6, inside.line);
  assert.match(scoreKernelCase("T()", problem, bounded, [bytes(1, 2.000002)], "dot(K)").line, /^T\(\): FAIL \(y\[1\]: expected 2, got 2\.00000191; ratio 2\.\d+ of the dot\(K\) bound\)$/);
  assert.match(scoreKernelCase("T()", problem, bounded, [bytes(1, NaN)], "dot(K)").line, /y\[1\]: expected 2, got NaN; ratio ∞/);
  assert.match(scoreKernelCase("T()", problem, bounded, [sentinelFilled("y", "F32", [2]).data], "dot(K)").line, /^T\(\): FAIL \(y\[0\] never written \(2\/2 elements still hold the sentinel\)\)$/);
});

test.run();
