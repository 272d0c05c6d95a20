// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { importCircles, importGraph, reachableFrom } from "../scripts/import-circles.js";

// Layers stay layers: a file is read alone only when it does not pull a ring of others with it.
const graph = importGraph();

test("the import graph is the real one: the run loop imports its kinds, the CLI its commands", () => {
  assert.ok(graph.get("harness/runner/run.ts")?.includes("harness/runner/kinds/registry.ts"), JSON.stringify(graph.get("harness/runner/run.ts")));
  assert.ok(reachableFrom(graph, ["harness/cli/main.ts"]).has("harness/runner/run.ts"));
});

test("no import circle of more than two files in harness/ (nor through server/ or kernels/)", () => {
  const large = importCircles(graph).filter((circle) => circle.length > 2);
  assert.equal(large, [], `break each circle where a lower layer imports a higher one: ${large.map((circle) => circle.join(" → ")).join("; ")}`);
});

test("the results layer imports nothing from the runner, directly or through others: a run is read without the code that wrote it", () => {
  const results = [...graph.keys()].filter((file) => file.startsWith("harness/results/"));
  assert.ok(results.length > 10, `results files: ${results.length}`);
  const runner = [...reachableFrom(graph, results)].filter((file) => file.startsWith("harness/runner/"));
  assert.equal(runner, []);
});

test.run();
