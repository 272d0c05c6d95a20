// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { BenchError } from "../harness/errors.js";
import { SUITE_KIND_NAMES } from "../harness/runner/kinds/registry.js";
import { loadSuite, schemaKinds } from "../harness/suites/load.js";
import { temporaryDirectory } from "./helpers/workspace.js";

// A suite kind is its plug-in in harness/runner/kinds/registry.ts and its schema in suites/schema/:
// a suite file is validated by the schema its kind names, and run by the plug-in.

test("every suite kind the runner knows has its schema, and every schema a kind the runner runs", () => {
  assert.equal([...SUITE_KIND_NAMES].sort(), schemaKinds());
});

test("a suite naming a kind with no schema is refused, naming the kinds there are", () => {
  const directory = temporaryDirectory("suite-kinds-");
  try {
    const path = join(directory.path, "odd.json");
    writeFileSync(path, JSON.stringify({ kind: "../parity", name: "odd", arms: [] }));
    assert.throws(() => loadSuite(path), (error: BenchError) => error.oneLine() === `${path}: kind: unknown suite kind "../parity" (fix: use one of ${schemaKinds().join(", ")})`);
  } finally {
    directory.remove();
  }
});

test.run();
