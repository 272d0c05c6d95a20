import { setTimeout as sleep } from "node:timers/promises";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { httpCall } from "../harness/sut/http-call.js";
import { parsePrometheusText } from "../harness/conformance/prometheus.js";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { resolveModel } from "../harness/fixtures/registry.js";
import { sha256File } from "../harness/io/sha256.js";
import { findValidation } from "../harness/results/validation.js";
import { validationBattery } from "../harness/box/batteries.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";
import { startBenchServe, waitHealthy } from "./helpers/bench-serve.js";
import { waitFor } from "./helpers/processes.js";

const work = temporaryDirectory("server");
test.after(() => work.remove());
const runs = join(work.path, "runs");
/** The default battery's stderr, from the first test that runs it. */
let batteryStderr: string | undefined;

/** Starts the real `bench serve` on a free loopback port, reading this file's runs; resolves once it listens. */
const serve = (args: string[]) => startBenchServe(runs, args);

test("bench serve refuses an artifact with no passing validation run, and says why", () => {
  const result = bench(["serve", "--model", "tiny-random:Q4_K", "--runs-dir", runs, "--port", "0"]);
  assert.is(result.status, 2);
  assert.match(result.stderr, /^bench: error: .*tiny-random\.v\d+\.Q4_K\.gguf: refusing to serve an unvalidated build: no validation battery is configured for tiny-random:Q4_K \(box\/batteries\.json, bench\.config\.json\) \(fix: name the suites that validate it in bench\.config\.json "batteries" \(docs\/serving-validated\.md\), run them with bench run, or pass --unvalidated\)$/m);
});

/** /v1/models of `bench serve --model MODEL`, asked once it is healthy; the server is then stopped. */
async function servedModel(model: string) {
  const server = await serve(["--model", model]);
  try {
    await waitHealthy(server.url);
    return JSON.parse((await httpCall(`${server.url}/v1/models`)).text).data[0];
  } finally {
    server.child.kill("SIGTERM");
    assert.is(await server.exited, 0);
  }
}

test("only a whole, unsubsetted battery run validates an artifact; a passing subset run does not", async () => {
  const subset = bench(["run", "--suite", "parity16", "--model", "tiny-random", "--prompt", "2", "--prompt", "3", "--runs-dir", runs, "--run-id", "subset"]);
  assert.is(subset.status, 0, subset.stdout + subset.stderr);
  const refused = bench(["serve", "--model", "tiny-random", "--runs-dir", runs, "--port", "0"]);
  assert.is(refused.status, 2);
  assert.match(refused.stderr, /refusing to serve an unvalidated build: no run validates this artifact \(sha256 [0-9a-f]{12}…\): the newest, run subset passed on it, but it was limited by --prompt: only a run of its whole battery \(parity16, zoo-quick, niah-quick, serve-conformance, owned-kernels\) validates \(fix: validate it with `bench run`, or pass --unvalidated\)/);
  // The whole default battery: parity through HTTP too, and the server's own conformance.
  const battery = bench(["run", "--runs-dir", runs, "--run-id", "battery"]);
  assert.is(battery.status, 0, battery.stdout + battery.stderr);
  batteryStderr = battery.stderr;
  const model = await servedModel("tiny-random");
  assert.is(model.validated, true);
  assert.is(model.validation_run, "battery");
});

test("a clean bench run (the default battery, in CI) writes nothing to stderr but its notices, and its servers no Node warning", () => {
  assert.ok(batteryStderr !== undefined, "the default battery ran in the test before");
  // Where llama-server is not built, the one notice that says which arms were left out; in CI mode progress is silent.
  const leftOut = /^note: \d+ arm\(s\) on llama\.cpp's llama-server left out, it is not built \(.*\): scripts\/build-llama-server\.sh builds it once \(a few minutes\)$/;
  assert.equal(batteryStderr.split("\n").filter((line) => line !== "" && !leftOut.test(line)), []);
  const legs = join(runs, "battery", "legs");
  const logs = readdirSync(legs).filter((name) => name.endsWith(".stderr.log"));
  assert.ok(logs.length > 0, "the server arms kept their stderr");
  for (const log of logs) assert.not.match(readFileSync(join(legs, log), "utf8"), /\(node:\d+\) \w*Warning/, log);
});

test("a later run that fails a required gate on the same artifact revokes its validation", async () => {
  const copy4k = await sha256File((await resolveModel("copy-4k")).path);
  const before = findValidation(copy4k, validationBattery("copy-4k")!.suites, runs);
  assert.ok(before.validated && before.run === "battery", JSON.stringify(before));
  // The needle suite on the same artifact with a context too short for its haystack: the needle is lost.
  const suite = JSON.parse(readFileSync(join(PACKAGE_ROOT, "suites", "niah.json"), "utf8"));
  delete suite.$schema;
  suite.arms = [{ label: "copy-4k", model: "copy-4k", settings: { threads: 2, context_size: 2048, prompt_overflow: "truncate-left" }, gate: "required" }];
  const truncated = join(work.path, "niah.json");
  writeFileSync(truncated, JSON.stringify(suite));
  assert.is(bench(["run", "--suite", truncated, "--niah-case", "4000:0.25:0", "--runs-dir", runs, "--run-id", "needle-lost"]).status, 1);
  const after = findValidation(copy4k, validationBattery("copy-4k")!.suites, runs);
  assert.not.ok(after.validated);
  assert.match(after.validated ? "" : after.reason, /^run needle-lost failed niah\/copy-4k\/niah on it \(sha256 [0-9a-f]{12}…\); a failing run revokes any earlier validation$/);
  const refused = bench(["serve", "--model", "copy-4k", "--runs-dir", runs, "--port", "0"]);
  assert.is(refused.status, 2);
  assert.match(refused.stderr, /refusing to serve an unvalidated build: run needle-lost failed/);
});

test("--unvalidated serves anyway and /v1/models says so, with the numerics it runs; an API key is enforced", async () => {
  const server = await serve(["--model", "tiny-random:Q4_K", "--unvalidated", "--api-key", "sesame", "--kv-cache-type", "F32", "--threads", "1", "--slots", "3", "--context-size", "512"]);
  try {
    await waitHealthy(server.url);
    assert.is((await httpCall(`${server.url}/v1/models`)).status, 401);
    const models = JSON.parse((await httpCall(`${server.url}/v1/models`, { apiKey: "sesame" })).text);
    assert.is(models.data[0].validated, false);
    assert.match(models.data[0].validation_note, /^UNVALIDATED: /);
    assert.equal(models.data[0].settings, { flash_attention: false, kv_cache_type: "F32", threads: 1, batch_size: 512, context_size: 512, slots: 3, promptCache: true, prefillChunk: 512, hostCacheMiB: 8192 });
    assert.match(server.output(), /warning: serving an UNVALIDATED build/);
  } finally {
    server.child.kill("SIGTERM");
    await server.exited;
  }
});

test("a slot's context is a hard limit: a longer prompt is 400, generation stops at it with finish_reason length; 2 threads run on a persistent pool", async () => {
  const server = await serve(["--model", "tiny-random", "--unvalidated", "--threads", "2", "--slots", "2", "--context-size", "64"]);
  try {
    await waitHealthy(server.url);
    const tokens = JSON.parse((await httpCall(`${server.url}/tokenize`, { body: { content: "the quick brown fox jumps over the lazy dog", add_special: true } })).text).tokens as number[];
    const prompt = (length: number) => Array.from({ length }, (_, i) => tokens[i % tokens.length]);
    const tooLong = await httpCall(`${server.url}/v1/completions`, { body: { prompt: prompt(65), max_tokens: 1 } });
    assert.is(tooLong.status, 400, tooLong.text);
    assert.match(JSON.parse(tooLong.text).error.message, /the prompt has 65 tokens, a slot holds 64/);
    const capped = JSON.parse((await httpCall(`${server.url}/v1/completions`, { body: { prompt: prompt(40), max_tokens: 100, temperature: 0, ignore_eos: true } })).text);
    assert.is(capped.usage.prompt_tokens, 40);
    assert.is(capped.usage.completion_tokens, 24);
    assert.is(capped.choices[0].finish_reason, "length");
    assert.not.match(server.output(), /threads anew for every graph/);
  } finally {
    server.child.kill("SIGTERM");
    await server.exited;
  }
});

test("SIGTERM drains: the in-flight request completes, new ones get 503, then the process exits 0", async () => {
  const server = await serve(["--model", "tiny-random", "--unvalidated", "--slots", "1"]);
  await waitHealthy(server.url);
  const inFlight = httpCall(`${server.url}/v1/completions`, { body: { prompt: "Drain", max_tokens: 600, temperature: 0 } });
  // No sleeps racing a loaded box: the signal goes once the server counts the request in flight, the
  // late request once the server says it drains.
  for (let polls = 0; (parsePrometheusText((await httpCall(`${server.url}/metrics`)).text).get("bench_in_flight") ?? 0) < 1; polls++) {
    assert.ok(polls < 6000, "the long request never showed as in flight");
    await sleep(20);
  }
  server.child.kill("SIGTERM");
  await waitFor("the server to start draining", () => (server.output().includes("SIGTERM: draining in-flight requests") ? true : undefined));
  const during = await httpCall(`${server.url}/v1/completions`, { body: { prompt: "late", max_tokens: 2 } }).catch(() => ({ status: 0, text: "" }));
  const finished = await inFlight;
  assert.is(finished.status, 200);
  assert.is(JSON.parse(finished.text).usage.completion_tokens, 600);
  assert.ok(during.status === 503 || during.status === 0, `a request during the drain got ${during.status}`);
  assert.is(await server.exited, 0);
  assert.match(server.output(), /SIGTERM: draining in-flight requests\ndrained; bye/);
});

test("the conformance suite passes against our server: every check a cell with a verdict", () => {
  // The battery run above included it.
  const cells = readFileSync(join(runs, "battery", "cells.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l)).filter((c) => c.suite === "serve-conformance" && c.arm === "server" && c.check === "conformance");
  const byCheck = Object.fromEntries(cells.map((c) => [c.prompt_class, c.status]));
  assert.equal(Object.keys(byCheck).sort(), ["bad_requests_400", "booting_503", "disconnect_frees_slot", "endpoints", "finish_reason", "metrics_prometheus", "overload_429", "sampling_honoured", "seed_determinism", "sse_framing", "usage", "stop_in_stream", "many_stop_strings", "echo_logprobs", "batched_prompts", "max_completion_tokens", "chat_logprobs", "metrics_naming", "greedy_logprobs", "greedy_logprobs_echo"].sort());
  assert.ok(Object.values(byCheck).every((status) => status === "pass"), JSON.stringify(byCheck));
  assert.match(cells.find((c) => c.prompt_class === "booting_503").detail, /^booting_503: \/health during boot: 503 \(simulated device boot\)/);
});

test.run();
