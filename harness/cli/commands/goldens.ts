import type { Command } from "commander";
import { relative } from "node:path";
import { BenchError } from "../../errors.js";
import { resolveModel } from "../../fixtures/registry.js";
import { goldensDir } from "../../goldens/goldens.js";
import { importGoldens } from "../../goldens/import.js";
import { goldensModelDirName, makeGoldens, remakeGoldens } from "../../goldens/make.js";
import { renderGapDiff } from "../../goldens/gap-diff.js";
import { GOLDEN_LOGPROB_TOLERANCE_NATS } from "../../goldens/logprob-tolerance.js";
import { listGoldensDirectories, verifyGoldens } from "../../goldens/verify.js";
import { CORPUS_MANIFEST_FILE, corpusGoldensDir, isCorpusGoldens, makeCorpusGoldens, remakeCorpusGoldens } from "../../perplexity/corpus-goldens.js";
import { renderCorpusGoldensDiff } from "../../perplexity/corpus-goldens-diff.js";
import { verifyCorpusGoldens } from "../../perplexity/verify-corpus-goldens.js";
import { loadParitySuite, loadSuite } from "../../suites/load.js";
import { goldensSuiteName, suiteOracles } from "../../suites/parity-suite.js";
import { paint, progress, say, warn } from "../output.js";
import { setExitCode } from "../exit-code.js";

export function registerGoldens(program: Command): void {
  const goldens = program.command("goldens").description("make, verify and import oracle goldens (goldens/<model>/<suite>/)");

  goldens
    .command("make")
    .description("run the llama.cpp oracle on a suite's prompts (a perplexity suite: its base model on its chunked corpus) and write its goldens atomically")
    .option("--suite <suite>", "suite name or path", "parity16")
    .option("--model <model>", "oracle model (fixture[:QUANT] or .gguf path; default: every oracle the suite's arms answer to)")
    .option("--out <dir>", "target directory (default: goldens/<model>/<suite>)")
    .option("--all", "re-make every committed goldens directory (after a fixture change or a llama.cpp update), a perplexity suite's corpus goldens included, and print per directory what moved (greedy ids and top-1/top-2 gaps; chunk ids, base top-1, next-token log-probs and perplexity)")
    .action(async (options: { suite: string; model?: string; out?: string; all?: boolean }) => {
      if (options.all === true) {
        if (options.model !== undefined || options.out !== undefined) throw new BenchError("--all re-makes every committed goldens directory in place", { field: "--all", fix: "drop --model and --out, or drop --all" });
        const directories = listGoldensDirectories();
        const corpusDirectories = listGoldensDirectories(undefined, CORPUS_MANIFEST_FILE);
        if (directories.length + corpusDirectories.length === 0) throw new BenchError("no goldens directories found", { file: "goldens/", fix: "make some with `bench goldens make --suite NAME`" });
        for (const directory of directories) {
          progress(`re-making ${directory}`);
          say(renderGapDiff({ ...(await remakeGoldens(directory)), directory: relative(process.cwd(), directory) }));
        }
        for (const directory of corpusDirectories) {
          progress(`re-making ${directory}`);
          say(renderCorpusGoldensDiff({ ...(await remakeCorpusGoldens(directory)), directory: relative(process.cwd(), directory) }));
        }
        return;
      }
      const named = loadSuite(options.suite);
      if (named.kind === "perplexity") {
        const model = await resolveModel(options.model ?? named.base.model);
        const directory = options.out ?? corpusGoldensDir(named, model);
        progress(`making corpus goldens for ${named.name} on ${model.id}`);
        const manifest = await makeCorpusGoldens(named, model, directory);
        say(`wrote ${directory} (${manifest.chunks} chunks × ${manifest.scored_per_chunk} scored of n_ctx ${manifest.n_ctx}, K=${manifest.K}, corpus sha256 ${manifest.corpus.sha256.slice(0, 16)}…, model sha256 ${manifest.model.sha256.slice(0, 16)}…)`);
        return;
      }
      const suite = loadParitySuite(options.suite);
      const references = options.model !== undefined ? [options.model] : suiteOracles(suite);
      if (options.out !== undefined && references.length > 1) {
        throw new BenchError(`suite ${suite.name} has ${references.length} oracles, --out names one directory`, { field: "--out", fix: `add --model, one of ${references.join(", ")}` });
      }
      for (const reference of references) {
        const model = await resolveModel(reference);
        const directory = options.out ?? goldensDir(goldensModelDirName(model), goldensSuiteName(suite));
        progress(`making goldens for ${suite.name} on ${model.id}`);
        const manifest = await makeGoldens(suite, model, directory);
        say(`wrote ${directory} (P=${manifest.prompts.count}, T=${manifest.T}, K=${manifest.K}, model sha256 ${manifest.model.sha256.slice(0, 16)}…)`);
      }
    });

  goldens
    .command("verify")
    .description("re-check every committed goldens directory against its model artifact, prompts (a perplexity suite's: corpus and chunking), tokenizer and oracle settings")
    .argument("[directories...]", "goldens directories (default: all under goldens/)")
    .option("--recompute", `also re-run the oracle: identical greedy ids, top-k log-probs within ${GOLDEN_LOGPROB_TOLERANCE_NATS} nats under the CPU variant that made them, a measured cross-variant tolerance under another (docs/findings-cpu.md)`)
    .action(async (directories: string[], options: { recompute?: boolean }) => {
      const targets = directories.length > 0 ? directories : [...listGoldensDirectories(), ...listGoldensDirectories(undefined, CORPUS_MANIFEST_FILE)];
      if (targets.length === 0) throw new BenchError("no goldens directories found", { file: "goldens/", fix: "make some with `bench goldens make`" });
      let failed = 0;
      for (const directory of targets) {
        progress(`verifying ${directory}`);
        const check = await (isCorpusGoldens(directory) ? verifyCorpusGoldens : verifyGoldens)(directory, { recompute: options.recompute === true });
        if (check.status === "ok") {
          say(`${paint("OK", "green")}        ${directory}`);
          for (const warning of check.warnings) warn(`${directory}: ${warning}`);
        } else {
          failed++;
          say(`${paint("MISMATCH", "red")}  ${check.reason}`);
        }
      }
      say(`${targets.length - failed}/${targets.length} goldens directories verified`);
      if (failed > 0) setExitCode(2);
    });

  goldens
    .command("import")
    .description("import another project's greedy goldens (greedy_ids.npy <i4 [P,T] + prompt ids) with provenance \"imported\" and K = 0: checks that need log-probs are SKIPPED on them")
    .requiredOption("--greedy <file>", "greedy_ids.npy, <i4 [P, T]")
    .requiredOption("--prompts <path>", "prompt ids as fed to the model: a .npy <i4 [P, L] padded with -1, or a directory of raw little-endian int32 files p0_prompt.i32 … (as C++ engines commit them)")
    .requiredOption("--model <model>", "the model the ids belong to: fixture[:QUANT], or the path of your own .gguf")
    .requiredOption("--suite <name>", "suite name to file the goldens under")
    .option("--source <text>", "where the goldens came from (recorded in the manifest)", "imported")
    .option("--out <dir>", "target directory (default: goldens/<model>/<suite>)")
    .option("--force", "replace goldens already in the target directory (refused otherwise)")
    .action(async (options: { greedy: string; prompts: string; model: string; suite: string; source: string; out?: string; force?: boolean }) => {
      const model = await resolveModel(options.model);
      const directory = options.out ?? goldensDir(goldensModelDirName(model), options.suite);
      const manifest = await importGoldens({ greedyPath: options.greedy, promptsPath: options.prompts, model, suite: options.suite, source: options.source, directory, force: options.force === true });
      say(`imported ${manifest.prompts.count} prompts × ${manifest.T} tokens into ${directory}`);
    });
}
