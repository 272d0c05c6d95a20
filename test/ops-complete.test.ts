// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { loadSuite } from "../harness/suites/load.js";
import type { KernelSuite } from "../harness/suites/kernel-suite.js";
import { buildCase, caseEncoding, KERNEL_OPS } from "../kernels/ops/registry.js";
import { ACCUMULATION_UNIT_ROUNDOFF } from "../harness/sut/types.js";

// An op is found from its entry in kernels/ops/registry.ts: this test names each part an op lacks
// (the generator and reference of its module, its bound in docs/kernel-bounds.md, its row in
// docs/kernel-ops.md, its C reference kernel and that kernel's registration in plugin.c).

const PLUGIN_DIR = join(PACKAGE_ROOT, "native", "reference-plugin");
const read = (path: string) => readFileSync(join(PACKAGE_ROOT, path), "utf8");
const pluginRegistrations = [...read("native/reference-plugin/plugin.c").matchAll(/OP\("(\w+)", "([\w:]+)", (\w+),/g)].map(([, op, encoding, kernel]) => ({ op, encoding, kernel }));
const owned = loadSuite("owned-kernels") as KernelSuite;

test("every op's generator and float64 reference answer one case of each encoding it declares", () => {
  for (const op of KERNEL_OPS.values()) {
    for (const encoding of op.encodings) {
      const spec = owned.cases.find((c) => c.op === op.name && caseEncoding(c) === encoding);
      assert.ok(spec !== undefined, `${op.name} ${encoding}: no case in kernels/owned-kernels.json`);
      const problem = buildCase(spec);
      assert.is(problem.op, op.name, `${op.name}: its generator names another op`);
      const expected = op.reference(problem, { u: ACCUMULATION_UNIT_ROUNDOFF.f32 });
      assert.is(expected.length, problem.outputs.length, `${op.name} ${encoding}: one reference answer per output`);
      const counts = op.counts(problem);
      assert.ok(counts.bytes > 0 && Number.isFinite(counts.flops), `${op.name}: byte and flop counts`);
    }
  }
});

test("every op has its bound in docs/kernel-bounds.md and its row in docs/kernel-ops.md", () => {
  const bounds = read("docs/kernel-bounds.md");
  const perOp = bounds.slice(bounds.indexOf("## Per op"), bounds.indexOf("\n## ", bounds.indexOf("## Per op") + 1));
  const boundHeadings = [...perOp.matchAll(/^\*\*([^*]+)\*\*/gm)].map(([, heading]) => heading);
  const opRows = read("docs/kernel-ops.md");
  for (const op of KERNEL_OPS.keys()) {
    assert.ok(boundHeadings.some((heading) => heading.split(/[:,] */).includes(op)), `${op}: no bold paragraph of docs/kernel-bounds.md's "Per op" names it`);
    assert.ok(opRows.includes(`\n| \`${op}\` |`), `${op}: no row in docs/kernel-ops.md's table`);
  }
});

test("every op's C reference kernel is where its entry says, and plugin.c registers it for each of its encodings (and nothing else)", () => {
  for (const op of KERNEL_OPS.values()) {
    const file = join(PLUGIN_DIR, op.native);
    assert.ok(existsSync(file), `${op.name}: native/reference-plugin/${op.native} does not exist`);
    // Defined with ops.h's KERNEL() macro or spelt out with the same signature.
    assert.match(readFileSync(file, "utf8"), new RegExp(`^(KERNEL\\(op_${op.name}\\)|int op_${op.name}\\()`, "m"), `${op.name}: native/reference-plugin/${op.native} defines no op_${op.name}`);
    const registered = pluginRegistrations.filter((r) => r.op === op.name);
    assert.equal(registered.map((r) => r.encoding).sort(), [...op.encodings].sort(), `${op.name}: plugin.c's encodings`);
    assert.ok(registered.every((r) => r.kernel === `op_${op.name}`), `${op.name}: plugin.c registers another function`);
  }
  const unknown = pluginRegistrations.filter((r) => !KERNEL_OPS.has(r.op));
  assert.equal(unknown, [], "plugin.c registers ops the registry does not know");
});

test.run();
