import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadSuite } from "../harness/suites/load.js";
import { armsBySut, batteryTask } from "../scripts/side-by-side.js";
import { temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("bench-scripts");
test.after(() => work.remove());

test("the benchmarks split every arm of their suites into embedded and server rows, none lost or doubled", () => {
  for (const name of ["parity16", "niah"]) {
    const suite = loadSuite(name) as { arms: readonly { label: string; sut?: string }[] };
    const { embedded, server } = armsBySut(suite.arms);
    assert.equal([...embedded, ...server].map((a) => a.label).sort(), suite.arms.map((a) => a.label).sort(), name);
    assert.ok(server.length > 0 && server.every((a) => a.sut === "http"), `${name} has a server arm, benchmarked on its own row`);
    assert.ok(embedded.length > 0 && embedded.every((a) => a.sut === undefined || a.sut === "llamacpp"), name);
  }
});

test("the harness side of a benchmark runs exactly the arms the raw side stands in for", async () => {
  await batteryTask("parity16", ["F32"], work.path)();
  const summary = JSON.parse(readFileSync(join(work.path, "run-0", "summary.json"), "utf8"));
  assert.equal(summary.suts.map((s: { arm: string }) => s.arm), ["F32"]);
  assert.equal([...new Set(summary.verdicts.map((v: { arm: string }) => v.arm))], ["F32"]);
  // Finalised like a CLI run, not left "running".
  assert.is(summary.status, "complete");
  assert.is(summary.exit_code, 0);
});

test.run();
