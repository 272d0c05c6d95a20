import { test } from "uvu";
import * as assert from "uvu/assert";
import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { forcedCpuVariant } from "../harness/cpu/cpu-identity.js";
import { BenchError } from "../harness/errors.js";
import { SUITES_DIR } from "../harness/paths.js";
import { corpusChunks } from "../harness/perplexity/chunks.js";
import { corpusGoldensDir, readCorpusGoldens } from "../harness/perplexity/corpus-goldens.js";
import { corpusGoldensDifference } from "../harness/perplexity/verify-corpus-goldens.js";
import { corpusStatistics, scorePosition, type BasePosition } from "../harness/perplexity/statistics.js";
import { resolveModel } from "../harness/fixtures/registry.js";
import { loadSuite } from "../harness/suites/load.js";
import type { PerplexitySuite } from "../harness/suites/perplexity-suite.js";
import { builtLlamaPerplexity, parseFinalEstimate, parseKlDivergenceReport, runLlamaPerplexity, type Printed } from "./helpers/llama-perplexity.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("perplexity");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const shipped = loadSuite("perplexity") as PerplexitySuite;
const corpusPath = resolve(SUITES_DIR, shipped.corpus);

type Metrics = Record<string, number | null>;
interface Summary { verdicts: Array<{ arm: string; check: string; status: string; metrics?: Metrics; summary?: string }> }
interface Cell { arm: string; check: string; status: string; detail: string }

function runOf(runId: string) {
  const read = (file: string) => readFileSync(join(runs, runId, file), "utf8");
  return {
    summary: () => JSON.parse(read("summary.json")) as Summary,
    cells: () => read("cells.jsonl").trim().split("\n").map((line) => JSON.parse(line) as Cell),
  };
}

test("chunks are cut as llama-perplexity cuts them: n_ctx tokens, BOS at each chunk's start, the second half less one scored; a short corpus is refused", () => {
  const ids = Array.from({ length: 17 }, (_, i) => (i === 0 ? 1 : 100 + i));
  const chunks = corpusChunks(ids, 8, 2, 1, "suite.json");
  assert.equal(chunks, [
    { promptIds: [1, 101, 102, 103, 104], continuationIds: [105, 106, 107] },
    { promptIds: [1, 109, 110, 111, 112], continuationIds: [113, 114, 115] },
  ]);
  // A vocabulary that adds no BOS keeps each chunk's own first token.
  assert.equal(corpusChunks(ids, 8, 2, undefined, "suite.json")[1].promptIds[0], 108);
  assert.throws(() => corpusChunks(ids, 8, 3, 1, "suite.json"), (e: unknown) => e instanceof BenchError && /lower chunks to at most 2/.test(e.oneLine()));
  assert.throws(() => corpusChunks(ids.slice(0, 15), 8, 1, 1, "suite.json"), (e: unknown) => e instanceof BenchError && /need 16/.test(e.oneLine()));
});

test("the statistics are llama-perplexity's: PPL and its error, ln PPL ratio with the covariance, KLD, Δp, RMS Δp and same-top p on hand-checked values", () => {
  const base: BasePosition = { topK: { ids: [0, 1], logprobs: [Math.log(0.5), Math.log(0.5)] }, nextLogprob: Math.log(0.5) };
  const same = scorePosition(base, { ids: [0, 1], logprobs: [Math.log(0.5), Math.log(0.5)] }, 0)!;
  const moved = scorePosition(base, { ids: [1, 0], logprobs: [Math.log(0.8), Math.log(0.2)] }, 0)!;
  assert.is(same.kld, 0);
  assert.ok(Math.abs(moved.kld - 0.5 * Math.log(1.5625)) < 1e-15, `${moved.kld}`);
  assert.ok(Math.abs(moved.deltaP + 0.3) < 1e-15);
  assert.equal([same.sameTop, moved.sameTop], [true, false]);
  // The next token outside the arm's answer: no guess, the position cannot be scored.
  assert.is(scorePosition(base, { ids: [1], logprobs: [Math.log(0.8)] }, 0), undefined);
  const s = corpusStatistics([same, moved])!;
  const close = (a: number | undefined, b: number) => assert.ok(a !== undefined && Math.abs(a - b) < 1e-12 * Math.max(1, Math.abs(b)), `${a} vs ${b}`);
  // nll = ln 2 and ln 5: mean (ln 10)/2, stderr sqrt((E[x²] − E[x]²)/(n − 1)) = (ln 5 − ln 2)/2.
  close(s.ppl.value, Math.sqrt(10));
  close(s.ppl.stderr, Math.sqrt(10) * (Math.log(5) - Math.log(2)) / 2);
  close(s.pplBase.value, 2);
  close(s.pplBase.stderr, 0);
  // The base's nll is constant: covariance 0, so the ratio's error is the arm's alone.
  close(s.lnPplRatio.value, (Math.log(5) - Math.log(2)) / 2);
  close(s.lnPplRatio.stderr, (Math.log(5) - Math.log(2)) / 2);
  close(s.kld.mean, 0.25 * Math.log(1.5625));
  close(s.rmsDeltaP.value, Math.sqrt(0.045));
  close(s.sameTop.p, 0.5);
  close(s.sameTop.stderr, 0.5);
  assert.is(corpusStatistics([]), undefined);
});

test("the shipped suite: every arm scores all 1,008 positions and passes its bounds; the base through the harness reproduces its goldens", () => {
  const result = bench(["run", "--suite", "perplexity", "--runs-dir", runs, "--run-id", "shipped"]);
  assert.is(result.status, 0, result.stdout + result.stderr);
  const verdicts = runOf("shipped").summary().verdicts.filter((v) => v.check === "perplexity");
  assert.equal(verdicts.map((v) => [v.arm, v.status]), shipped.arms.map((arm) => [arm.label, "pass"]));
  for (const v of verdicts) assert.is(v.metrics?.positions, 16 * 63, v.arm);
  const f32 = verdicts.find((v) => v.arm === "F32")!.metrics!;
  assert.ok(f32.kld_mean! < 1e-9 && Math.abs(f32.ln_ppl_ratio!) < 1e-6 && f32.same_top === 1, JSON.stringify(f32));
  // Coarser encodings drift further from the base: the order of the quantizers' precision.
  const kld = (arm: string) => verdicts.find((v) => v.arm === arm)!.metrics!.kld_mean!;
  assert.ok(kld("Q8_0") < kld("Q6_K") && kld("Q6_K") < kld("Q5_K") && kld("Q5_K") < kld("Q4_K"), verdicts.map((v) => `${v.arm} ${v.metrics?.kld_mean}`).join(", "));
});

test("a planted fault (layer 1's value projection with 30% noise, tiny-random-perturbed-layer) fails the Q8_0 arm's gate, with lower perplexity than the base", () => {
  const result = bench(["run", "--suite", "perplexity", "--arm", "Q8_0", "--model", "tiny-random-perturbed-layer:Q8_0", "--runs-dir", runs, "--run-id", "broken"]);
  assert.is(result.status, 1, result.stdout + result.stderr);
  const run = runOf("broken");
  const verdict = run.summary().verdicts.find((v) => v.check === "perplexity")!;
  assert.is(verdict.status, "fail");
  // The broken model is "better" on the corpus: only a two-sided bound on the ratio sees it.
  assert.ok(verdict.metrics!.ln_ppl_ratio! < -0.1, String(verdict.metrics!.ln_ppl_ratio));
  const failed = run.cells().filter((c) => c.status === "fail").map((c) => c.detail);
  for (const bound of ["abs ln ppl ratio", "kld mean", "rms delta p", "same top"]) assert.ok(failed.some((d) => d.startsWith(`FAIL ${bound}`)), `${bound}: ${failed.join(" | ")}`);
});

test("goldens belong to their corpus: a changed corpus is refused (exit 2, naming corpus.sha256), an edited array by its hash (bench goldens verify: exit 2), and bench goldens make and verify --recompute reproduce the committed ones", async () => {
  const changed = join(work.path, "changed.txt");
  writeFileSync(changed, readFileSync(corpusPath, "utf8").replace("lighthouse", "lamphouse"));
  const suitePath = join(work.path, "perplexity.json");
  writeFileSync(suitePath, JSON.stringify({ ...JSON.parse(readFileSync(shipped.path, "utf8")), corpus: changed }));
  const refused = bench(["run", "--suite", suitePath, "--runs-dir", runs, "--run-id", "changed"]);
  assert.is(refused.status, 2, refused.stdout + refused.stderr);
  assert.match(refused.stderr, /corpus\.sha256: the suite's corpus changed since its goldens were made/);

  // An edited array is refused by its hash, naming the file and the field.
  const committedDir = corpusGoldensDir(shipped, await resolveModel(shipped.base.model));
  const edited = join(work.path, "edited");
  cpSync(committedDir, edited, { recursive: true });
  const nextLogprobs = readFileSync(join(edited, "next_logprobs.npy"));
  nextLogprobs[nextLogprobs.length - 1] ^= 1;
  writeFileSync(join(edited, "next_logprobs.npy"), nextLogprobs);
  assert.throws(() => readCorpusGoldens(edited), (e: unknown) => e instanceof BenchError && /next_logprobs\.npy: files\.next_logprobs\.npy: sha256/.test(e.oneLine()));

  const out = join(work.path, "remade");
  const made = bench(["goldens", "make", "--suite", "perplexity", "--out", out]);
  assert.is(made.status, 0, made.stdout + made.stderr);
  const committed = readCorpusGoldens(committedDir);
  const remade = readCorpusGoldens(out);
  assert.equal(remade.manifest.corpus, committed.manifest.corpus);
  // Ids exactly; log-probs within what a CPU's instruction set moves them (harness/goldens/logprob-tolerance.ts).
  assert.is(corpusGoldensDifference(committed, remade), undefined);
  const nudged = { ...remade, base: remade.base.map((chunk, c) => chunk.map((p, j) => (c === 3 && j === 7 ? { ...p, nextLogprob: p.nextLogprob - 1e-3 } : p))) };
  assert.match(corpusGoldensDifference(committed, nudged) ?? "", /^chunk 3 position 7: next-token log-prob/);

  // bench goldens verify covers them: the committed ones pass (--recompute: the base evaluated again), the edited copy is a mismatch (exit 2).
  const verified = bench(["goldens", "verify", "--recompute", committedDir]);
  assert.is(verified.status, 0, verified.stdout + verified.stderr);
  const mismatch = bench(["goldens", "verify", edited]);
  assert.is(mismatch.status, 2, mismatch.stdout + mismatch.stderr);
  assert.match(mismatch.stdout, /MISMATCH .*next_logprobs\.npy/);
});

test("bounds belong to the corpus they were measured on: the prose suite's arms on the licenses corpus test the F32 arm, SKIP each quantized arm (exit 77) and print the bounds the rule gives there, within the ones perplexity-licenses ships for every CPU variant", () => {
  const licenses = loadSuite("perplexity-licenses") as PerplexitySuite;
  // Named as the licenses suite, so that it reads that corpus's committed goldens; the arms and bounds are the prose suite's.
  const suitePath = join(work.path, "prose-bounds-on-licenses.json");
  writeFileSync(suitePath, JSON.stringify({ ...JSON.parse(readFileSync(shipped.path, "utf8")), name: licenses.name, corpus: resolve(SUITES_DIR, licenses.corpus) }));
  const result = bench(["run", "--suite", suitePath, "--runs-dir", runs, "--run-id", "other-corpus"]);
  assert.is(result.status, 77, result.stdout + result.stderr);
  const verdicts = runOf("other-corpus").summary().verdicts as Array<{ arm: string; status: string; reason?: string }>;
  assert.is(verdicts.find((v) => v.arm === "F32")!.status, "pass", "bounds that hold on any text are still tested");
  for (const arm of licenses.arms.filter((a) => a.bounds_corpus_sha256 !== undefined)) {
    const verdict = verdicts.find((v) => v.arm === arm.label)!;
    assert.is(verdict.status, "skip", arm.label);
    const printed = /gives "bounds": (\{[^}]*\}), "bounds_corpus_sha256": "([0-9a-f]{64})"/.exec(verdict.reason ?? "");
    assert.ok(printed !== null, verdict.reason);
    // The rule applied to this run's values; the licenses suite ships it applied to the worst of every CPU variant, so no wider.
    const derived = JSON.parse(printed![1]) as Record<string, number>;
    assert.equal(Object.keys(derived), Object.keys(arm.bounds!), arm.label);
    for (const [bound, value] of Object.entries(derived)) {
      const shipped = arm.bounds![bound as keyof typeof arm.bounds]!;
      assert.ok(bound.startsWith("min_") ? value >= shipped : value <= shipped, `${arm.label} ${bound}: printed ${value}, shipped ${shipped}`);
    }
    assert.is(printed![2], arm.bounds_corpus_sha256);
  }
});

/** |ours − printed| within half a unit of the last digit printed. */
function agreesToPrinted(ours: number, printed: Printed): boolean {
  return Math.abs(ours - printed.value) <= 0.5 * 10 ** -printed.decimals;
}

// Not built here (scripts/build-llama-server.sh builds it next to llama-server): counted as skipped, never as a pass; CI builds it.
const llamaPerplexity = builtLlamaPerplexity();
(llamaPerplexity !== undefined || process.env.BENCH_REQUIRE_LLAMA_SERVER === "1" ? test : test.skip)("llama-perplexity on the same files, n_ctx, chunks and threads prints the statistics the suite computed", async () => {
  assert.ok(llamaPerplexity !== undefined, "BENCH_REQUIRE_LLAMA_SERVER=1 (CI builds llama-perplexity with llama-server): it must be there");
  // The suite's numbers: the shipped-suite run of the test above. llama-perplexity is compiled for this
  // machine's own instruction set, so under a forced ggml CPU variant the suite runs again as ggml picks.
  let compared = "shipped";
  if (forcedCpuVariant() !== undefined) {
    compared = "unforced";
    const unforced = bench(["run", "--suite", "perplexity", "--runs-dir", runs, "--run-id", compared], { BENCH_CPU_VARIANT: "" });
    assert.is(unforced.status, 0, unforced.stdout + unforced.stderr);
  }
  const metricsOf = (arm: string) => runOf(compared).summary().verdicts.find((v) => v.check === "perplexity" && v.arm === arm)!.metrics!;
  const options = { nCtx: shipped.n_ctx, threads: 1 };
  const baseModel = (await resolveModel(shipped.base.model)).path;
  const corpusArgs = ["-f", corpusPath, "--chunks", String(shipped.chunks)];
  // The plain run's PPL is the tool's precise one (double log-softmax); the run that saves the base file computes it in float.
  const base = parseFinalEstimate(runLlamaPerplexity(llamaPerplexity, ["-m", baseModel, ...corpusArgs], options, "Final estimate"));
  const baseFile = join(work.path, "base.kld");
  runLlamaPerplexity(llamaPerplexity, ["-m", baseModel, ...corpusArgs, "--kl-divergence-base", baseFile], options, undefined);
  // Its base file starts "_logits_", n_ctx, n_vocab, n_chunk, then the corpus tokens it scored: the same ids the suite fed, but for the BOS each chunk starts with.
  const header = readFileSync(baseFile);
  assert.is(header.subarray(0, 8).toString("latin1"), "_logits_");
  assert.equal([header.readUInt32LE(8), header.readInt32LE(16)], [shipped.n_ctx, shipped.chunks]);
  const theirIds = Array.from({ length: shipped.n_ctx * shipped.chunks }, (_, i) => header.readInt32LE(20 + 4 * i));
  const goldens = readCorpusGoldens(corpusGoldensDir(shipped, await resolveModel(shipped.base.model)));
  goldens.chunks.forEach((chunk, c) => assert.equal(theirIds.slice(c * shipped.n_ctx + 1, (c + 1) * shipped.n_ctx), [...chunk.promptIds.slice(1), ...chunk.continuationIds], `chunk ${c}`));
  const f32 = metricsOf("F32");
  // PPL compared as ln PPL (a mean nll, in nats): this fixture's PPL is 4e13, printed to 4 decimals, 18 digits, more than a
  // float64 mean holds; the arm's probabilities are float32, whose rounding moves a mean nll by about 1e-7 nats (docs/perplexity.md).
  const lnDifference = (ours: number, theirs: number) => Math.abs(Math.log(ours / theirs));
  assert.ok(lnDifference(f32.ppl_base!, base.ppl.value) < 1e-6, `PPL ${f32.ppl_base} vs llama-perplexity ${base.ppl.value}`);
  assert.ok(lnDifference(f32.ppl_base_stderr!, base.stderr.value) < 1e-4, `PPL error ${f32.ppl_base_stderr} vs ${base.stderr.value}`);
  // Q8_0 runs the same kernels in both engines; Q4_K does not: node-llama-cpp's prebuilt CPU backend and the llama.cpp built here
  // pick different Q4_K dot products (repacked or not, by instruction set), and llama-perplexity's own --no-repack moves its Q4_K
  // mean nll by 9e-4 nats. Q4_K is held to that spread, the statistics' definitions to the Q8_0 arm.
  const engineSpreadNats: Record<string, number> = { Q8_0: 1e-6, Q4_K: 1e-3 };
  for (const arm of ["Q8_0", "Q4_K"]) {
    const ours = metricsOf(arm);
    const model = (await resolveModel(shipped.arms.find((a) => a.label === arm)!.model)).path;
    // The statistics block's last line, "Same top p: …"; the chunk table's header names the same column without a colon.
    const report = parseKlDivergenceReport(runLlamaPerplexity(llamaPerplexity, ["-m", model, "--kl-divergence-base", baseFile, "--kl-divergence"], options, "Same top p:"));
    const line = (name: string) => { const entry = report.get(name); assert.ok(entry !== undefined, `no "${name}" line: ${[...report.keys()].join(", ")}`); return entry!; };
    const ctx = `${arm}: ours ${JSON.stringify(ours)}`;
    const pplQ = line("Mean PPL(Q)").value.value;
    assert.ok(lnDifference(ours.ppl!, pplQ) < engineSpreadNats[arm], `${ctx}\nPPL(Q) ${pplQ}`);
    // Its own ln ratio takes the base's nll from the base file, where a log-prob more than 16 nats below the top is stored as
    // that floor: on this fixture's corpus it reads PPL(base) as 3.0e6, not 4.1e13. The ratio of its two exact PPLs is the comparison.
    assert.ok(Math.abs(ours.ln_ppl_ratio! - Math.log(pplQ / base.ppl.value)) < engineSpreadNats[arm] + 1e-6, `${ctx}\nln(PPL(Q)/PPL(base)) ${Math.log(pplQ / base.ppl.value)}`);
    const kld = line("Mean KLD");
    for (const [name, key] of [["Mean KLD", "kld_mean"], ["Median KLD", "kld_median"], ["99.0% KLD", "kld_p99"]] as const) {
      assert.ok(Math.abs(ours[key]! - line(name).value.value) <= kld.uncertainty!.value, `${ctx}\n${name} ${line(name).value.value} ± ${kld.uncertainty!.value}`);
    }
    const deltaP = line("Mean Δp");
    assert.ok(Math.abs(100 * ours.delta_p_mean! - deltaP.value.value) <= deltaP.uncertainty!.value, `${ctx}\nmean Δp ${deltaP.value.value} ± ${deltaP.uncertainty!.value} %`);
    const rms = line("RMS Δp");
    assert.ok(Math.abs(100 * ours.rms_delta_p! - rms.value.value) <= rms.uncertainty!.value, `${ctx}\nRMS Δp ${rms.value.value} ± ${rms.uncertainty!.value} %`);
    // Same top p counts positions: the same argmax on both sides gives the same count, to the printed digits.
    assert.ok(agreesToPrinted(100 * ours.same_top!, line("Same top p").value), `${ctx}\nsame top ${line("Same top p").value.value} %`);
  }
});

test.run();
