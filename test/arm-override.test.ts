import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { resolveModel } from "../harness/fixtures/registry.js";
import { sha256File } from "../harness/io/sha256.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("arm-override");
test.after(() => work.remove());
const runs = join(work.path, "runs");

test("--arm 'server F32' --model X keeps the arm's SUT: our server, serving X, recorded as http", async () => {
  const result = bench(["run", "--suite", "parity16", "--arm", "server F32", "--model", "tiny-random:Q8_0", "--prompt", "0", "--prompt", "1", "--runs-dir", runs, "--run-id", "server-q8"]);
  assert.ok(result.status === 0 || result.status === 1, `a verdict, not an error: ${result.stdout}${result.stderr}`);
  const summary = JSON.parse(readFileSync(join(runs, "server-q8", "summary.json"), "utf8"));
  assert.is(summary.suts.length, 1);
  const [sut] = summary.suts;
  assert.is(sut.arm, "server F32 on tiny-random:Q8_0");
  assert.is(sut.provenance.kind, "http", "the arm's SUT (our server), not the embedded llama.cpp");
  assert.is(sut.provenance.settings.managed, true);
  assert.is(sut.provenance.modelSha256, await sha256File((await resolveModel("tiny-random:Q8_0")).path), "the server served X");
  const cells = readFileSync(join(runs, "server-q8", "cells.jsonl"), "utf8");
  assert.match(cells, /"reproduce":"bench run --suite parity16 --arm \\"server F32\\" --model tiny-random:Q8_0/);
});

test.run();
