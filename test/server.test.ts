import { setTimeout as sleep } from "node:timers/promises";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { httpCall } from "../harness/sut/http.js";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { BENCH_BIN, bench, temporaryDirectory, withoutForceColor } from "./helpers/workspace.js";

const work = temporaryDirectory("server");
test.after(() => work.remove());
const runs = join(work.path, "runs");

/** Starts the real `bench serve` on a free loopback port; resolves once it listens. */
async function serve(args: string[]): Promise<{ child: ChildProcess; url: string; output: () => string; exited: Promise<number | null> }> {
  const child = spawn(process.execPath, [BENCH_BIN, "serve", "--port", "0", "--runs-dir", runs, ...args], { cwd: PACKAGE_ROOT, env: { ...withoutForceColor(process.env), CI: "1", NO_COLOR: "1" } });
  let output = "";
  child.stderr!.on("data", (chunk) => { output += chunk; });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on("line", (line) => {
      output += `${line}\n`;
      const match = /^listening on (\S+)$/.exec(line);
      if (match !== null) resolve(match[1]);
    });
    void exited.then((code) => reject(new Error(`bench serve exited ${code}: ${output}`)));
  });
  return { child, url, output: () => output, exited };
}

async function waitHealthy(url: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if ((await httpCall(`${url}/health`)).status === 200) return;
    await sleep(50);
  }
  throw new Error("server never became healthy");
}

test("bench serve refuses an artifact with no passing validation run, and says why", () => {
  const result = bench(["serve", "--model", "tiny-random:Q4_K", "--runs-dir", runs, "--port", "0"]);
  assert.is(result.status, 2);
  assert.match(result.stderr, /^bench: error: .*tiny-random\.v1\.Q4_K\.gguf: refusing to serve an unvalidated build: no run in .* tested this artifact .* \(fix: validate it with `bench run --model tiny-random:Q4_K`, or pass --unvalidated\)$/m);
});

test("parity through HTTP validates the build; bench serve then serves it as validated", async () => {
  const run = bench(["run", "--suite", "parity16", "--arm", "server F32", "--arm", "F32", "--runs-dir", runs, "--run-id", "validation"]);
  assert.is(run.status, 0, run.stdout + run.stderr);
  assert.match(run.stdout, /^server F32 correctness gate: 16\/16 prompts PASS \(STRICT 16\/16;/m);
  const server = await serve(["--model", "tiny-random"]);
  try {
    await waitHealthy(server.url);
    const models = JSON.parse((await httpCall(`${server.url}/v1/models`)).text);
    assert.is(models.data[0].validated, true);
    assert.is(models.data[0].validation_run, "validation");
  } finally {
    server.child.kill("SIGTERM");
    assert.is(await server.exited, 0);
  }
});

test("--unvalidated serves anyway and /v1/models says so, with the numerics it runs; an API key is enforced", async () => {
  const server = await serve(["--model", "tiny-random:Q4_K", "--unvalidated", "--api-key", "sesame", "--kv-cache-type", "F32", "--threads", "1", "--slots", "3", "--context-size", "512"]);
  try {
    await waitHealthy(server.url);
    assert.is((await httpCall(`${server.url}/v1/models`)).status, 401);
    const models = JSON.parse((await httpCall(`${server.url}/v1/models`, { apiKey: "sesame" })).text);
    assert.is(models.data[0].validated, false);
    assert.match(models.data[0].validation_note, /^UNVALIDATED: /);
    assert.equal(models.data[0].settings, { flash_attention: false, kv_cache_type: "F32", threads: 1, batch_size: 512, context_size: 512, slots: 3 });
    assert.match(server.output(), /warning: serving an UNVALIDATED build/);
  } finally {
    server.child.kill("SIGTERM");
    await server.exited;
  }
});

test("SIGTERM drains: the in-flight request completes, new ones get 503, then the process exits 0", async () => {
  const server = await serve(["--model", "tiny-random", "--unvalidated", "--slots", "1"]);
  await waitHealthy(server.url);
  const inFlight = httpCall(`${server.url}/v1/completions`, { body: { prompt: "Drain", max_tokens: 600, temperature: 0 } });
  await sleep(150);
  server.child.kill("SIGTERM");
  await sleep(100);
  const during = await httpCall(`${server.url}/v1/completions`, { body: { prompt: "late", max_tokens: 2 } }).catch(() => ({ status: 0, text: "" }));
  const finished = await inFlight;
  assert.is(finished.status, 200);
  assert.is(JSON.parse(finished.text).usage.completion_tokens, 600);
  assert.ok(during.status === 503 || during.status === 0, `a request during the drain got ${during.status}`);
  assert.is(await server.exited, 0);
  assert.match(server.output(), /SIGTERM: draining in-flight requests\ndrained; bye/);
});

test("the conformance suite passes against our server: every check a cell with a verdict", () => {
  const result = bench(["run", "--suite", "serve-conformance", "--runs-dir", runs, "--run-id", "conformance"]);
  assert.is(result.status, 0, result.stdout + result.stderr);
  const cells = readFileSync(join(runs, "conformance", "cells.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
  const byCheck = Object.fromEntries(cells.map((c) => [c.prompt_class, c.status]));
  assert.equal(Object.keys(byCheck).sort(), ["bad_requests_400", "booting_503", "disconnect_frees_slot", "endpoints", "finish_reason", "metrics_prometheus", "overload_429", "sampling_honoured", "seed_determinism", "sse_framing", "usage"]);
  assert.ok(Object.values(byCheck).every((status) => status === "pass"), JSON.stringify(byCheck));
  assert.match(result.stdout, /PASS booting_503: \/health during boot: 503 \(simulated device boot\)/);
});

test.run();
