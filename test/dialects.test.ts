import { test } from "uvu";
import * as assert from "uvu/assert";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stopManagedServer } from "../harness/sut/managed-server.js";
import { openHttpSut } from "../harness/sut/http.js";
import { startServerCommand } from "../harness/sut/server-command.js";
import { builtLlamaServer } from "../harness/sut/llama-server-binary.js";
import { resolveModel } from "../harness/fixtures/registry.js";
import { runCheck } from "../harness/runner/check.js";
import { PACKAGE_ROOT } from "../harness/paths.js";
import type { GateVerdict } from "../harness/results/types.js";
import { FAKE_VLLM_VOCAB, fakeVllmTop, startFakeVllmServer } from "./helpers/scripted-server.js";
import { bench, benchAsync, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("bench-dialects-");
const runs = join(work.path, "runs");

test("a FAKE vLLM-style server is probed as vLLM: /tokenize, ids as token_id:N, prompt_logprobs — each answer read as the rule computes it, the API key on every request", async () => {
  const fake = await startFakeVllmServer({ apiKey: "sk-fake-123" });
  try {
    const sut = await openHttpSut(fake.url, { label: "fake vllm", apiKey: "sk-fake-123" });
    assert.is(sut.provenance.settings.dialect_tokenize, "vllm");
    assert.is(sut.provenance.settings.dialect_greedy, "vllm");
    assert.is(sut.provenance.settings.dialect_teacherForced, "vllm");
    assert.is(sut.provenance.settings.dialect, "vllm");
    const code = (c: string) => c.charCodeAt(0) % FAKE_VLLM_VOCAB;
    assert.equal(await sut.tokenize!(["ab"]), [[1, code("a"), code("b")]]);
    assert.equal(await sut.greedy!([{ promptIds: [1, 5], maxTokens: 3 }]), [[6, 7, 8]]);
    const [rows] = await sut.teacherForcedTopK!([{ promptIds: [1, 5], continuationIds: [9, 40], k: 3 }]);
    // Row j is the distribution before continuation token j: after 5, then after 9 (40 is outside the top-3, vLLM adds it with its rank; dropped).
    assert.equal(rows, [fakeVllmTop(5, 3), fakeVllmTop(9, 3)]);
    // No dialect has token kinds for a server the harness did not start on a GGUF: absent, with each dialect's refusal.
    assert.is(sut.inspectTokens, undefined);
    assert.match(sut.unsupported?.inspectTokens ?? "", /^no dialect serves it \(bringup-bench: \/token_kinds answered 404/);
    assert.ok(fake.requests().length > 0 && fake.requests().every((line) => line.endsWith("Bearer sk-fake-123")), fake.requests().join("\n"));
    await sut.close();
  } finally {
    await fake.close();
  }
});

test("a server that answers text only offers no greedy ids: the check is SKIPPED with every dialect's refusal, never passed", async () => {
  const fake = await startFakeVllmServer({ textOnly: true });
  try {
    const sut = await openHttpSut(fake.url, { label: "text only" });
    assert.ok(sut.tokenize !== undefined, "tokenizing still works");
    assert.is(sut.greedy, undefined);
    assert.is(sut.teacherForcedTopK, undefined);
    const verdicts: GateVerdict[] = [];
    await runCheck({ suiteName: "s", arm: { label: "text only", gate: "required" }, sut, emit: (e) => { if (e.kind === "verdict") verdicts.push(e.verdict); }, signal: new AbortController().signal, reproduce: "" },
      "greedy_parity", "required", ["greedy"], async () => { throw new Error("must not run"); });
    assert.is(verdicts[0].status, "skip");
    const reason = "reason" in verdicts[0] ? verdicts[0].reason : "";
    assert.match(reason, /lacks greedy: no dialect serves it \(llama\.cpp: \/completion answered 404.*; vllm: .*not a "token_id:<id>" token.*; openai: choices\[0\]\.token_ids is missing/);
  } finally {
    await fake.close();
  }
});

/** parity16's prompts and goldens, with the arms given. */
function paritySuite(name: string, arms: unknown[]): string {
  const suite = JSON.parse(readFileSync(join(PACKAGE_ROOT, "suites", "parity16.json"), "utf8"));
  delete suite.$schema;
  const path = join(work.path, `${name}.json`);
  writeFileSync(path, JSON.stringify({ ...suite, name, goldens_of: "parity16", arms }));
  return path;
}

test("a parity arm at the url of someone else's server: the key comes from the named variable and is written nowhere; the dialect is recorded", async () => {
  const fake = await startFakeVllmServer({ apiKey: "sk-secret-456" });
  try {
    const suite = paritySuite("url-arm", [{ label: "fake vllm", model: "tiny-random:F32", sut: "http", url: fake.url, api_key_env: "FAKE_VLLM_KEY", gate: "required" }]);
    const missingKey = await benchAsync(["run", "--suite", suite, "--prompt", "0", "--runs-dir", runs, "--run-id", "no-key"]);
    assert.is(missingKey.status, 2, missingKey.stderr);
    assert.match(missingKey.stderr, /api_key_env: arm "fake vllm": the environment variable FAKE_VLLM_KEY is not set/);
    const result = await benchAsync(["run", "--suite", suite, "--prompt", "0", "--runs-dir", runs, "--run-id", "url"], { FAKE_VLLM_KEY: "sk-secret-456" });
    // The FAKE is a rule, not the model: its ids differ from the goldens, and the run says so.
    assert.is(result.status, 1, result.stdout + result.stderr);
    const summary = JSON.parse(readFileSync(join(runs, "url", "summary.json"), "utf8"));
    const sut = summary.provenance?.suts?.[0] ?? summary.suts?.[0];
    // Token kinds come from the GGUF the arm names: the FAKE has no word for them.
    assert.is(sut.provenance.settings.dialect, "vllm+gguf");
    assert.is(sut.provenance.settings.dialect_greedy, "vllm");
    for (const file of readdirSync(join(runs, "url"))) assert.not.match(readFileSync(join(runs, "url", file), "utf8"), /sk-secret-456/, file);
  } finally {
    await fake.close();
  }
});

test("arms on llama-server are left out with a note where it is not built; named, or required by BENCH_REQUIRE_LLAMA_SERVER, its absence is exit 2", () => {
  const suite = paritySuite("unbuilt", [
    { label: "F32", model: "tiny-random:F32", gate: "required" },
    { label: "llama-server F32", model: "tiny-random:F32", sut: "http", command: ["{llama-server}", "-m", "{model}", "--port", "{port}"], gate: "required" },
  ]);
  const nowhere = { XDG_CACHE_HOME: join(work.path, "empty-cache"), BENCH_BUILD_CACHE_DIR: "", BENCH_REQUIRE_LLAMA_SERVER: "" };
  const env = (extra: Record<string, string>) => ({ ...nowhere, ...extra });
  // BENCH_BUILD_CACHE_DIR="" must not count as set (CI sets BENCH_REQUIRE_LLAMA_SERVER=1: unset here): the script reads it with ${VAR:-…}.
  const left = bench(["run", "--suite", suite, "--prompt", "0", "--prompt", "1", "--runs-dir", runs, "--run-id", "unbuilt"], env({}));
  assert.is(left.status, 0, left.stdout + left.stderr);
  assert.match(left.stderr, /^note: 1 arm\(s\) on llama\.cpp's llama-server left out, it is not built \(unbuilt \/ llama-server F32\): scripts\/build-llama-server\.sh builds it once/m);
  const required = bench(["run", "--suite", suite, "--prompt", "0", "--runs-dir", runs], env({ BENCH_REQUIRE_LLAMA_SERVER: "1" }));
  assert.is(required.status, 2);
  assert.match(required.stderr, /BENCH_REQUIRE_LLAMA_SERVER=1 but llama-server is not built/);
  const named = bench(["run", "--suite", suite, "--arm", "llama-server F32", "--prompt", "0", "--runs-dir", runs], env({}));
  assert.is(named.status, 2);
  assert.match(named.stderr, /llama-server is not built .*scripts\/build-llama-server\.sh/);
});

// Not built here (scripts/build-llama-server.sh): counted as skipped, never as a pass; CI builds it and requires it.
const llamaServerRequired = builtLlamaServer() !== undefined || process.env.BENCH_REQUIRE_LLAMA_SERVER === "1";
(llamaServerRequired ? test : test.skip)("llama.cpp's own llama-server is probed as llama.cpp: ids through /completion, teacher forcing through n_probs, token kinds from the GGUF it was started on", async () => {
  const binary = builtLlamaServer();
  assert.ok(binary !== undefined, "BENCH_REQUIRE_LLAMA_SERVER=1 (CI builds llama-server): it must be there");
  const model = await resolveModel("tiny-random:F32");
  const server = await startServerCommand([binary, "-m", model.path, "--port", "{port}", "-t", "1", "-c", "512", "-np", "1", "--no-webui"], { label: "llama-server", bootTimeoutS: 120 });
  try {
    const sut = await openHttpSut(server.baseUrl, { label: "llama-server", managed: server, modelPath: model.path, command: server.argv });
    assert.equal(
      [sut.provenance.settings.dialect_tokenize, sut.provenance.settings.dialect_detokenize, sut.provenance.settings.dialect_greedy, sut.provenance.settings.dialect_teacherForced, sut.provenance.settings.dialect_inspectTokens],
      ["llama.cpp", "llama.cpp", "llama.cpp", "llama.cpp", "gguf"]);
    // Prompt-cache requests through /completion (timings.cache_n), chat through the OpenAI endpoint it shares.
    assert.equal([sut.provenance.settings.dialect_cachedGreedy, sut.provenance.settings.dialect_cachedChat], ["llama.cpp", "openai"]);
    assert.is(sut.provenance.settings.dialect, "llama.cpp+openai+gguf");
    const [ids] = await sut.tokenize!(["Hello"]);
    const [greedy] = await sut.greedy!([{ promptIds: ids, maxTokens: 4 }]);
    assert.is(greedy.length, 4);
    const [rows] = await sut.teacherForcedTopK!([{ promptIds: ids, continuationIds: greedy.slice(0, 2), k: 5 }]);
    // Greedy's own tokens are the top-1 of the distributions that chose them.
    assert.equal(rows.map((row) => row.ids[0]), greedy.slice(0, 2));
    await sut.close();
  } finally {
    await stopManagedServer(server);
  }
});

test.after(() => work.remove());
test.run();
