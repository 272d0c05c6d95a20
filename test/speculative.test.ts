import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureFixture } from "../harness/fixtures/registry.js";
import { readGguf } from "../harness/gguf/read.js";
import { goldensDir, readGoldens } from "../harness/goldens/goldens.js";
import { firstDivergence, speculationFigures, sumCounts } from "../harness/speculative/compare.js";
import { builtLlamaServer } from "../harness/sut/llama-server-binary.js";
import { LlamaCppSut, ORACLE_SETTINGS } from "../harness/sut/llamacpp.js";
import type { GateVerdict } from "../harness/results/types.js";
import { exitCodeFor } from "../harness/results/verdicts.js";
import { assertFixturesMatchPins } from "./helpers/fixture-pins.js";
import { describeRun, runInProcess, type InProcessRun } from "./helpers/in-process-run.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("speculative");
test.after(() => work.remove());
const runs = join(work.path, "runs");

test("firstDivergence names the first differing position, a length difference included, and nothing for identical ids", () => {
  assert.is(firstDivergence([5, 6, 7], [5, 6, 7]), undefined);
  assert.equal(firstDivergence([5, 6, 7, 8], [5, 6, 9, 8]), { position: 2, expected: 7, observed: 9 });
  assert.equal(firstDivergence([5, 6, 7], [5, 6]), { position: 2, expected: 7, observed: null });
  assert.equal(firstDivergence([5], [5, 4]), { position: 1, expected: null, observed: 4 });
  assert.equal(firstDivergence([], [3]), { position: 0, expected: null, observed: 3 });
});

test("speculation figures: acceptance over drafted, tokens per target step from generated and accepted, speed-up from generation rates", () => {
  const speculating = sumCounts([{ generated: 16, generatingMs: 20, drafted: 12, accepted: 6 }, { generated: 16, generatingMs: 20, drafted: 8, accepted: 4 }]);
  assert.equal(speculating, { generated: 32, generatingMs: 40, drafted: 20, accepted: 10 });
  const figures = speculationFigures(speculating, { generated: 32, generatingMs: 80, drafted: 0, accepted: 0 });
  assert.is(figures.acceptance_rate, 0.5);
  // 32 tokens of which 10 came from accepted drafts: 22 target steps.
  assert.is(figures.tokens_per_target_step, 32 / 22);
  assert.is(figures.plain_tokens_per_s, 400);
  assert.is(figures.speculative_tokens_per_s, 800);
  assert.is(figures.speedup, 2);
  const idle = speculationFigures({ generated: 8, generatingMs: 0, drafted: 0, accepted: 0 }, { generated: 8, generatingMs: 10, drafted: 0, accepted: 0 });
  assert.equal([idle.acceptance_rate, idle.tokens_per_target_step, idle.speculative_tokens_per_s, idle.speedup], [null, 1, null, null]);
});

/** Pinned like every fixture: a change here is a fixture change (bump FIXTURE_BUILDER_VERSION). */
test("the draft and MTP fixtures built in a fresh cache match their pinned sha256", async () => {
  await assertFixturesMatchPins({
    "tiny-random-draft": { F32: "f819a0c976c842a7a16250ee0bb7cd7820eab3122c73431ba6fd1af08ad0627b" },
    "qwen35-tiny-mtp": { F32: "9d92cb0320bc1745893465631b93f696e4147bbb6c862d3f9206d4e700a5114c" },
    "qwen35-tiny-mtp-in-trunk": { F32: "7d5cad137705ad5603f29847d0974ae60e443acb4e1b7611becb7d50194342e7" },
    "qwen35moe-tiny-mtp": { F32: "55df24bbd2f2f1157d56120de3d528e6d40a9e2a9a1d84418eac0ab45bc7c223" },
  }, join(work.path, "cache"));
});

test("qwen35-tiny-mtp is qwen35-tiny's trunk, tensor for tensor, plus one next-N block counted in block_count", async () => {
  const trunk = readGguf(await ensureFixture("qwen35-tiny", "F32"));
  const mtp = readGguf(await ensureFixture("qwen35-tiny-mtp", "F32"));
  assert.is(mtp.metadata.get("qwen35.block_count")?.value, 5);
  assert.is(mtp.metadata.get("qwen35.nextn_predict_layers")?.value, 1);
  assert.is(trunk.metadata.get("qwen35.nextn_predict_layers"), undefined);
  const names = (file: typeof mtp) => file.tensors.map((t) => t.name);
  assert.equal(names(mtp).slice(0, trunk.tensors.length), names(trunk));
  const block = mtp.tensors.slice(trunk.tensors.length);
  assert.ok(block.every((t) => t.name.startsWith("blk.4.")), "every added tensor is the MTP block's");
  assert.equal(block.find((t) => t.name === "blk.4.nextn.eh_proj.weight")?.dims, [512, 256], "eh_proj maps [embedding; trunk state] to the embedding width");
  for (const name of ["blk.4.nextn.enorm.weight", "blk.4.nextn.hnorm.weight", "blk.4.attn_q.weight", "blk.4.ffn_down.weight"]) assert.ok(block.some((t) => t.name === name), name);
});

test("the MTP fixture's trunk answers the zoo prompts with qwen35-tiny's committed greedy goldens (llama.cpp leaves the block out of the trunk)", async () => {
  const goldens = readGoldens(goldensDir("qwen35-tiny.F32", "zoo"));
  const sut = await LlamaCppSut.open(await ensureFixture("qwen35-tiny-mtp", "F32"), { ...ORACLE_SETTINGS, sequences: 1, contextSize: 256 });
  try {
    const greedy = await sut.greedy(goldens.promptIds.map((promptIds) => ({ promptIds, maxTokens: goldens.manifest.T })));
    greedy.forEach((ids, p) => assert.equal(ids, goldens.greedyIds[p], `prompt ${p}`));
  } finally {
    await sut.close();
  }
});

test("held to their plain trunks' zoo goldens, the MTP fixtures pass every numerical gate, and the FAKE that runs the block as a fifth trunk layer fails the distribution gate", async () => {
  // The three models as arms of one zoo run, each what `--arm A --model M` makes of it (arm A's settings
  // and oracle on model M, required, labelled "A on M"): one process start instead of three.
  const suite = JSON.parse(readFileSync(join("suites", "zoo.json"), "utf8")) as { arms: { label: string }[] };
  const onModel = (armLabel: string, model: string) => ({ ...suite.arms.find((a) => a.label === armLabel)!, label: `${armLabel} on ${model}`, model, gate: "required", why: undefined });
  const arms = [onModel("qwen35 F32", "qwen35-tiny-mtp:F32"), onModel("qwen35moe F32", "qwen35moe-tiny-mtp:F32"), onModel("qwen35 F32", "qwen35-tiny-mtp-in-trunk:F32")];
  const path = join(work.path, "mtp-trunks.json");
  writeFileSync(path, JSON.stringify({ ...suite, $schema: undefined, arms }));
  const result = await runInProcess(runs, "mtp-trunks", { suites: [path], prompts: [0, 1] });
  // Exit 1 for each: the identity check says the file is not the goldens' own (by design, it is another artifact).
  assert.is(result.code, 1, describeRun(result));
  const summary = JSON.parse(readFileSync(join(runs, "mtp-trunks", "summary.json"), "utf8")) as { verdicts: GateVerdict[] };
  const gates = (arm: { label: string }) => {
    const own = summary.verdicts.filter((v) => v.arm === arm.label);
    assert.is(exitCodeFor(own), 1, `${arm.label}: ${JSON.stringify(own)}`);
    return Object.fromEntries(own.map((v) => [v.check, v.status]));
  };
  const [mtp, moe, inTrunk] = arms.map(gates);
  assert.equal([mtp.identity, mtp.greedy_parity, mtp.distribution, mtp.determinism, mtp.batch_invariance], ["fail", "pass", "pass", "pass", "pass"]);
  assert.equal([moe.identity, moe.greedy_parity, moe.distribution, moe.determinism, moe.batch_invariance], ["fail", "pass", "pass", "pass", "pass"]);
  assert.equal([inTrunk.identity, inTrunk.distribution], ["fail", "fail"]);
});

test("a speculation that passes {draft} without naming a draft model, or prompts_of naming no parity suite, is bad input: exit 2 naming the field", () => {
  const suite = JSON.parse(readFileSync(join("suites", "speculative.json"), "utf8")) as { arms: Record<string, unknown>[] };
  delete suite.arms[0].draft;
  const path = join(work.path, "no-draft.json");
  writeFileSync(path, JSON.stringify(suite));
  const result = bench(["run", "--suite", path, "--runs-dir", runs]);
  assert.is(result.status, 2, result.stderr);
  assert.match(result.stderr, /no-draft\.json: arms\.draft: arm "llama-server draft model" passes \{draft\} but names no draft model \(fix: name the draft model/);
  const noParity = join(work.path, "prompts-of-niah.json");
  writeFileSync(noParity, JSON.stringify({ ...JSON.parse(readFileSync(join("suites", "speculative.json"), "utf8")), prompts_of: "niah" }));
  const refused = bench(["run", "--suite", noParity, "--runs-dir", runs]);
  assert.is(refused.status, 2, refused.stderr);
  assert.match(refused.stderr, /prompts-of-niah\.json: prompts_of: prompts_of "niah": suite niah is a niah suite, a parity suite is needed here \(fix: name a parity suite/);
});

// Not built here (scripts/build-llama-server.sh): counted as skipped, never as a pass; CI builds it and requires it.
const llamaServerRequired = builtLlamaServer() !== undefined || process.env.BENCH_REQUIRE_LLAMA_SERVER === "1";
(llamaServerRequired ? test : test.skip)("llama-server speculating with the draft fixtures and with each MTP block answers exactly as without speculation, and both accept some drafts and reject others", async () => {
  const arms = ["llama-server draft model", "llama-server draft qwen35", "llama-server MTP", "llama-server MTP qwen35moe"];
  const result = await runInProcess(runs, "spec", { suites: ["speculative"], arms, prompts: [0, 1, 2, 3] });
  assert.is(result.code, 0, describeRun(result));
  const summary = JSON.parse(readFileSync(join(runs, "spec", "summary.json"), "utf8")) as { verdicts: { arm: string; check: string; status: string; metrics?: Record<string, number | null> }[] };
  const verdicts = summary.verdicts.filter((v) => v.check === "speculative_greedy");
  assert.equal(verdicts.map((v) => v.arm).sort(), ["llama-server MTP", "llama-server MTP qwen35moe", "llama-server draft model", "llama-server draft qwen35"]);
  for (const verdict of verdicts) {
    assert.is(verdict.status, "pass", verdict.arm);
    const m = verdict.metrics!;
    // Four prompts, two lengths, one at a time and four at once.
    assert.is(m.answers, 16, verdict.arm);
    assert.ok(m.drafted! > 0 && m.accepted! > 0 && m.accepted! < m.drafted!, `${verdict.arm}: drafted ${m.drafted}, accepted ${m.accepted}`);
    assert.ok(m.tokens_per_target_step! > 1, `${verdict.arm}: ${m.tokens_per_target_step} tokens per target step`);
    assert.ok(m.speedup! > 0, `${verdict.arm}: speed-up ${m.speedup}`);
  }
});

interface SpeculativeVerdict { arm: string; check: string; status: string; summary?: string; metrics?: Record<string, number | null> }

function speculativeVerdicts(runId: string): SpeculativeVerdict[] {
  const summary = JSON.parse(readFileSync(join(runs, runId, "summary.json"), "utf8")) as { verdicts: SpeculativeVerdict[] };
  return summary.verdicts.filter((v) => v.check === "speculative_greedy");
}

test("our server speculating with a draft model, on tiny-random and on qwen35 (recurrent rollback), answers exactly as without, and accepts some drafts and rejects others", async () => {
  const result = await runInProcess(runs, "ours", { suites: ["speculative"], arms: ["bench serve draft model", "bench serve draft qwen35"], prompts: [0, 1] });
  assert.is(result.code, 0, describeRun(result));
  const verdicts = speculativeVerdicts("ours");
  assert.equal(verdicts.map((v) => v.arm).sort(), ["bench serve draft model", "bench serve draft qwen35"]);
  for (const verdict of verdicts) {
    assert.is(verdict.status, "pass", verdict.arm);
    const m = verdict.metrics!;
    // Two prompts, two lengths, one at a time and four at once.
    assert.is(m.answers, 8, verdict.arm);
    assert.ok(m.drafted! > 0 && m.accepted! > 0 && m.accepted! < m.drafted!, `${verdict.arm}: drafted ${m.drafted}, accepted ${m.accepted}`);
    assert.ok(m.concurrent_drafted! > 0 && m.concurrent_accepted! > 0, `${verdict.arm}: at B=4 drafted ${m.concurrent_drafted}, accepted ${m.concurrent_accepted}`);
    assert.ok(m.tokens_per_target_step! > 1, `${verdict.arm}: ${m.tokens_per_target_step} tokens per target step`);
    assert.ok(m.speedup! > 0, `${verdict.arm}: speed-up ${m.speedup}`);
  }
  // Both servers of a leg run under its process hooks: the plain one's stderr is in the leg's evidence too.
  const legs = (JSON.parse(readFileSync(join(runs, "ours", "summary.json"), "utf8")) as { legs: { processes: { command: string }[] }[] }).legs;
  for (const leg of legs) assert.equal(leg.processes.map((p) => p.command.includes("--draft-model")), [true, false]);
});

test("a server whose speculation arguments do not make it speculate is SKIPPED, never passed: the probe saw no draft (exit 77)", async () => {
  const suite = JSON.parse(readFileSync(join("suites", "speculative.json"), "utf8")) as { arms: { label: string; draft?: string; speculation: string[] }[] };
  const ours = suite.arms.find((a) => a.label === "bench serve draft model")!;
  const arm = { ...ours, label: "bench serve that does not draft", draft: undefined, speculation: ["--no-prompt-cache"] };
  const path = join(work.path, "no-speculation.json");
  writeFileSync(path, JSON.stringify({ ...suite, $schema: undefined, arms: [arm] }));
  const result = await runInProcess(runs, "not-drafting", { suites: [path], prompts: [0] });
  assert.is(result.code, 77, describeRun(result));
  const [verdict] = speculativeVerdicts("not-drafting");
  assert.is(verdict.status, "skip");
  assert.match(JSON.stringify(verdict), /did not speculate when probed: .*openai: no token drafted in 8: the server does not speculate/);
});

/**
 * Each speculation fault planted in our server (BENCH_SERVER_FAULT, inherited by both of the arm's
 * servers; only the speculating one has anything to break), on the suite's prompts 0 and 1 at T = 32,
 * where each bites: exit 1, the first failing cell naming the position and whether a kept draft was there.
 */
const SPECULATION_FAULTS: readonly { fault: string; arm: string; at: RegExp }[] = [
  // A wrong draft is kept at once: the token there is the kept draft.
  { fault: "spec-accept-past-mismatch", arm: "bench serve draft model", at: /the token at position \d+ was an accepted draft/ },
  // A draft trailing the argmax by less than 0.5 nats is kept: the first such draft on these prompts comes within 32 tokens.
  { fault: "spec-accept-near-tie", arm: "bench serve draft model", at: /the token at position \d+ was an accepted draft/ },
  // The kept tokens are right; the recurrent state behind them still holds the rejected drafts, so the target's own next token goes wrong.
  { fault: "spec-no-rollback", arm: "bench serve draft qwen35", at: /the token at position \d+ was the target's own, no draft accepted there/ },
];

/**
 * The faults as arms of one run, each arm's command prefixed by `env BENCH_SERVER_FAULT=<fault>` so
 * that both of its servers inherit the fault, as they did from a run of their own: one process start
 * instead of three.
 */
function makeFaultRun() {
  const suite = JSON.parse(readFileSync(join("suites", "speculative.json"), "utf8")) as { arms: { label: string; command: string[] }[] };
  const arms = SPECULATION_FAULTS.map(({ fault, arm }) => {
    const template = suite.arms.find((a) => a.label === arm)!;
    return { ...template, label: `${arm} with ${fault}`, command: ["env", `BENCH_SERVER_FAULT=${fault}`, ...template.command] };
  });
  const path = join(work.path, "server-faults.json");
  writeFileSync(path, JSON.stringify({ ...suite, $schema: undefined, max_tokens: [32], arms }));
  return runInProcess(runs, "server-faults", { suites: [path], prompts: [0, 1] });
}
let faultRun: Promise<InProcessRun> | undefined;

for (const { fault, arm, at } of SPECULATION_FAULTS) {
  test(`planted fault ${fault} in our server fails the required speculative check with exit 1, naming the position`, async () => {
    const result = await (faultRun ??= makeFaultRun());
    assert.is(result.code, 1, describeRun(result));
    const summary = JSON.parse(readFileSync(join(runs, "server-faults", "summary.json"), "utf8")) as { verdicts: GateVerdict[] };
    const own = summary.verdicts.filter((v) => v.arm === `${arm} with ${fault}`);
    assert.is(exitCodeFor(own), 1, JSON.stringify(own));
    const [verdict] = own.filter((v) => v.check === "speculative_greedy");
    assert.is(verdict.status, "fail");
    const text = verdict.status === "fail" ? verdict.summary : "";
    assert.match(text, /^FAIL: \d+ of 4 answers diverge from plain greedy, 0 malformed; first: prompt [01] \((single|B=4), T=32\): speculation changed greedy output at position \d+: plain \d+, speculative \d+; /);
    assert.match(text, at);
  });
}

(llamaServerRequired ? test : test.skip)("a FAKE proxy that changes one token of every answer with accepted drafts fails the required check with exit 1, naming the position", async () => {
  const suite = JSON.parse(readFileSync(join("suites", "speculative.json"), "utf8")) as { arms: { label: string; command: string[] }[] };
  const position = 10;
  // The proxy listens on the arm's {port} and starts the server on a port of its own choosing.
  const arm = { ...suite.arms[0], label: "FAKE keeps a wrong token", command: ["node", "{bench}/dist/test/helpers/fake-speculation-proxy.js", "--listen", "{port}", "--position", String(position), "--",
    ...suite.arms[0].command.map((part) => (part === "{port}" ? "{inner-port}" : part))] };
  const path = join(work.path, "fake-proxy.json");
  writeFileSync(path, JSON.stringify({ ...suite, $schema: undefined, arms: [arm] }));
  const result = await runInProcess(runs, "fake", { suites: [path], prompts: [0] });
  assert.is(result.code, 1, describeRun(result));
  const summary = JSON.parse(readFileSync(join(runs, "fake", "summary.json"), "utf8")) as { verdicts: { check: string; status: string; summary?: string }[] };
  const verdict = summary.verdicts.find((v) => v.check === "speculative_greedy")!;
  assert.is(verdict.status, "fail");
  assert.match(verdict.summary!, new RegExp(`^FAIL: 4 of 4 answers diverge from plain greedy, 0 malformed; first: prompt 0 \\(single, T=16\\): speculation changed greedy output at position ${position}: `));
});

test.run();
