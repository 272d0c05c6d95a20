/**
 * --cpu-variant: llama.cpp under a named ggml CPU library in bench and every process it starts
 * (harness/cpu/forced-variant.ts), and the CPU identity every run summary, SUT and golden records.
 */
import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { forcedCpuVariant } from "../harness/cpu/cpu-identity.js";
import { defaultCpuVariant, forceCpuVariant, probeVariant, shippedCpuVariants } from "../harness/cpu/forced-variant.js";
import { contrastingVariant } from "../harness/cpu/variant-features.js";
import { resolveModel } from "../harness/fixtures/registry.js";
import { httpCall } from "../harness/sut/http-call.js";
import { startManagedServer, stopManagedServer } from "../harness/sut/managed-server.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("cpu-variant");
test.after(() => work.remove());

const picked = defaultCpuVariant();
/** The variant these tests run unless told otherwise (npm test --cpu-variant forces one for all). */
const ambient = forcedCpuVariant() ?? picked;
/** A variant on another instruction set than the ambient one, which loads here. */
const other = [contrastingVariant(ambient), "x64", "sse42"].find((v) => v !== ambient && probeVariant(v).loads)!;

test("bench cpu-variants: every shipped variant once, whether it loads, ggml's pick marked; --contrast names another instruction set", () => {
  const listed = bench(["cpu-variants"]);
  assert.is(listed.status, 0, listed.stderr);
  const rows = listed.stdout.trim().split("\n").slice(1);
  assert.equal(rows.map((row) => row.split(/\s+/)[0]), [...shippedCpuVariants()]);
  assert.equal(rows.filter((row) => row.includes("← ggml's pick here")).map((row) => row.split(/\s+/)[0]), [picked]);
  for (const row of rows) assert.match(row, /^\S+\s+(loads here|cannot load)\s/);
  const contrast = bench(["cpu-variants", "--contrast"]);
  assert.is(contrast.stdout.trim(), contrastingVariant(picked));
  assert.is.not(contrast.stdout.trim(), picked);
});

test(`bench run --cpu-variant ${other}: the summary, the embedded SUT and our server's arm name it, and the arms pass`, () => {
  const runs = join(work.path, "runs");
  const result = bench(["run", "--cpu-variant", other, "--suite", "zoo-quick", "--arm", "qwen35 F32", "--arm", "qwen35 server F32", "--prompt", "0", "--prompt", "1", "--runs-dir", runs, "--run-id", "forced"]);
  assert.is(result.status, 0, result.stdout + result.stderr);
  const summary = JSON.parse(readFileSync(join(runs, "forced", "summary.json"), "utf8"));
  assert.equal(summary.machine.ggml_cpu.variant, other);
  assert.is(summary.machine.ggml_cpu.forced, true);
  const embedded = summary.suts.find((s: { arm: string }) => s.arm === "qwen35 F32");
  assert.is(embedded.provenance.cpu.variant, other, "the embedded SUT mapped the forced library");
  assert.match(readFileSync(join(runs, "forced", "summary.md"), "utf8"), new RegExp(`ggml CPU variant ${other} \\(forced\\)`));
});

test(`a server started under --cpu-variant ${other} maps that library, not ggml's pick, and says so in /v1/models`, async () => {
  const saved = { variant: process.env.BENCH_CPU_VARIANT, options: process.env.NODE_OPTIONS };
  forceCpuVariant(other);
  let server;
  try {
    server = await startManagedServer({ modelPath: (await resolveModel("tiny-random:F32")).path, slots: 1, queue: 1, contextSize: 256, threads: 1, flashAttention: false, bootTimeoutS: 120 });
    const libraries = [...new Set(readFileSync(`/proc/${server.child.pid}/maps`, "utf8").match(/libggml-cpu-\w+\.so/g) ?? [])];
    assert.equal(libraries, [`libggml-cpu-${other}.so`]);
    const listed = JSON.parse((await httpCall(`${server.baseUrl}/v1/models`)).text) as { data: { ggml_cpu: { variant: string; forced: boolean } }[] };
    assert.equal([listed.data[0].ggml_cpu.variant, listed.data[0].ggml_cpu.forced], [other, true], "/v1/models says where the server computes");
  } finally {
    if (server !== undefined) await stopManagedServer(server);
    for (const [name, value] of [["BENCH_CPU_VARIANT", saved.variant], ["NODE_OPTIONS", saved.options]] as const) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
});

test(`bench goldens make --cpu-variant ${other}: the manifest says where the oracle computed`, () => {
  const out = join(work.path, "goldens");
  const made = bench(["goldens", "make", "--cpu-variant", other, "--suite", "zoo-quick", "--model", "qwen35-tiny:F32", "--out", out]);
  assert.is(made.status, 0, made.stdout + made.stderr);
  const manifest = JSON.parse(readFileSync(join(out, "manifest.json"), "utf8"));
  assert.is(manifest.oracle.cpu.variant, other);
  assert.is(manifest.oracle.cpu.forced, true);
  assert.ok(manifest.oracle.cpu.model.length > 0);
});

test("an unknown or missing variant name: exit 2, one line naming the option and the fix", () => {
  const unknown = bench(["run", "--cpu-variant", "pentium2"]);
  assert.is(unknown.status, 2);
  assert.match(unknown.stderr.trim(), /^bench: error: --cpu-variant pentium2: not a ggml CPU variant this install ships; use one of x64, /);
  assert.is(unknown.stderr.trim().split("\n").length, 1);
  const missing = bench(["run", "--cpu-variant"]);
  assert.is(missing.status, 2);
  assert.match(missing.stderr, /--cpu-variant needs a ggml CPU variant name/);
});

test.run();
