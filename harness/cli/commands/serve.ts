import type { Command } from "commander";
import { resolve } from "node:path";
import { kvCacheType, wholeNumber } from "../option-parsers.js";
import { resolveModel } from "../../fixtures/registry.js";
import { BenchError } from "../../errors.js";
import { sha256File } from "../../io/sha256.js";
import { RUNS_DIR } from "../../paths.js";
import { findValidation, type Validation } from "../../results/validation.js";
import { validationBattery, validationFix } from "../../box/batteries.js";
import { resolveBoxSettings } from "../../box/config.js";
import { startServer } from "../../../server/start.js";
import { SERVER_FAULT_ENV, serverFaultFromEnvironment } from "../../../server/faults.js";
import { progress, say, warn } from "../output.js";
import { onOrderlyStop } from "../exit-code.js";


interface ServeOptions {
  model: string;
  host: string;
  port: number;
  slots: number;
  queue: number;
  contextSize: number;
  threads: number;
  flashAttention?: boolean;
  kvCacheType: "F32" | "F16";
  batchSize: number;
  promptCache: boolean;
  prefillChunk?: number;
  cacheRam: number;
  draftModel?: string;
  draftMax: number;
  apiKey?: string;
  maxPromptTokens: number;
  maxTokens: number;
  unvalidated?: boolean;
  runsDir: string;
  config?: string;
  simulateBoot: number;
  exitWithStdin?: boolean;
  traceSteps?: string;
}

/**
 * Ties the server's life to whoever holds the other end of its stdin. A parent that dies by SIGKILL
 * runs no handler, but the kernel closes its pipes: end-of-file here is the one notice that always
 * comes, so the server drains as on SIGTERM instead of living on as an orphan holding its port.
 */
function exitWhenStdinCloses(): void {
  // The parent's ends of stdout/stderr are gone too: a failed log line must not stop the drain.
  const ignore = () => undefined;
  process.stdin.once("end", () => {
    process.stdout.on("error", ignore);
    process.stderr.on("error", ignore);
    process.kill(process.pid, "SIGTERM");
  });
  process.stdin.resume();
}

/** llama-server's default --cache-ram (common/common.h: cache_ram_mib). */
const DEFAULT_CACHE_RAM_MIB = 8192;

/** llama-server's default --draft-max (common/common.h: common_params_speculative_draft.n_max). */
const DEFAULT_DRAFT_MAX = 3;

export function registerServe(program: Command): void {
  program
    .command("serve")
    .description("serve a validated build over an OpenAI-compatible continuous-batching HTTP API")
    .requiredOption("--model <model>", "fixture[:QUANT] or .gguf path; must have a passing run of its validation battery in --runs-dir")
    .option("--host <host>", "address to bind", "127.0.0.1")
    .option("--port <port>", "port (0: any free port)", wholeNumber, 8080)
    .option("--slots <n>", "concurrent sequences (continuous-batching slots)", wholeNumber, 4)
    .option("--queue <n>", "requests that may wait for a slot; beyond slots + queue the server answers 429", wholeNumber, 16)
    .option("--context-size <tokens>", "tokens per slot", wholeNumber, 4096)
    .option("--threads <n>", "llama.cpp threads", wholeNumber, 2)
    .option("--flash-attention", "flash attention on")
    .option("--kv-cache-type <type>", "KV cache type (F32 or F16)", kvCacheType, "F16" as const)
    .option("--batch-size <tokens>", "llama.cpp batch size", wholeNumber, 512)
    .option("--no-prompt-cache", "start every request from a cleared slot (the prompt cache is on by default: docs/server-cache.md)")
    .option("--prefill-chunk <tokens>", "prompt tokens per llama_decode (default: the batch size)", wholeNumber)
    .option("--cache-ram <MiB>", "host memory for the prompt cache beyond the slots: conversations that lose their slot keep their state there (0: none; llama-server's default)", wholeNumber, DEFAULT_CACHE_RAM_MIB)
    .option("--draft-model <model>", "speculate greedy requests with this draft model (fixture[:QUANT] or .gguf, the target's vocabulary): docs/speculative.md")
    .option("--draft-max <tokens>", "tokens the draft proposes per step, at most (with --draft-model)", wholeNumber, DEFAULT_DRAFT_MAX)
    .option("--api-key <key>", "require Authorization: Bearer <key>")
    .option("--max-prompt-tokens <n>", "longest prompt accepted", wholeNumber, 4096)
    .option("--max-tokens <n>", "largest max_tokens accepted", wholeNumber, 1024)
    .option("--unvalidated", "serve even without a passing validation run (/v1/models then says so)")
    .option("--runs-dir <dir>", "where validation runs are", RUNS_DIR)
    .option("--config <file>", "box configuration whose batteries name the suites that validate the team's models (default: bench.config.json in the working directory, if there is one)")
    .option("--exit-with-stdin", "drain and exit when stdin closes (how a parent such as `bench run` makes sure the server never outlives it, even after kill -9)")
    .option("--trace-steps <file>", "write one JSON line per engine step and per request event to this file, for taking a first token's wait apart (docs/step-trace.md)")
    .option("--simulate-boot <seconds>", "FAKE: stay in the boot stage this long (to test clients against slow device boots)", wholeNumber, 0)
    .action(async (options: ServeOptions, command: Command) => {
      const model = await resolveModel(options.model);
      const sha256 = await sha256File(model.path);
      const battery = validationBattery(options.model, resolveBoxSettings({ config: options.config }).batteries);
      const validation: Validation = battery === undefined
        ? { validated: false, reason: `no validation battery is configured for ${model.id} (box/batteries.json, bench.config.json)` }
        : findValidation(sha256, battery.suites, options.runsDir);
      if (!validation.validated && options.unvalidated !== true) {
        throw new BenchError(`refusing to serve an unvalidated build: ${validation.reason}`, { file: model.path, fix: `${validationFix(battery)}, or pass --unvalidated` });
      }
      if (!validation.validated) warn(`serving an UNVALIDATED build: ${validation.reason}`);
      if (options.draftModel === undefined && command.getOptionValueSource("draftMax") === "cli") {
        throw new BenchError("--draft-max without --draft-model: nothing would draft", { field: "--draft-max", fix: "add --draft-model <model>, or drop --draft-max" });
      }
      if (options.draftMax < 1) throw new BenchError("--draft-max 0 drafts nothing", { field: "--draft-max", fix: "give 1 or more, or drop --draft-model" });
      const draft = options.draftModel === undefined ? undefined : await resolveModel(options.draftModel);
      const fault = serverFaultFromEnvironment();
      if (fault !== undefined) warn(`PLANTED FAULT ${fault} (${SERVER_FAULT_ENV}): this server is deliberately broken, for tests`);
      const server = await startServer({
        fault,
        modelPath: model.path, modelId: model.id, host: options.host, port: options.port, apiKey: options.apiKey,
        slots: Math.max(1, options.slots), maxQueue: options.queue, contextSize: options.contextSize, threads: Math.max(1, options.threads),
        flashAttention: options.flashAttention === true, kvCacheType: options.kvCacheType, batchSize: Math.max(1, options.batchSize),
        promptCache: options.promptCache, prefillChunk: Math.max(1, options.prefillChunk ?? options.batchSize), hostCacheMiB: options.cacheRam, maxPromptTokens: options.maxPromptTokens, maxTokensCap: options.maxTokens,
        simulateBootSeconds: options.simulateBoot,
        ...(options.traceSteps === undefined ? {} : { traceSteps: { path: resolve(options.traceSteps), onWarning: (message: string) => warn(message) } }),
        ...(draft === undefined ? {} : { speculation: { draftModelPath: draft.path, draftMax: options.draftMax } }),
        validation: validation.validated
          ? { validated: true, run: validation.run, note: `validated by run ${validation.run} (${validation.arms.join(", ")})` }
          : { validated: false, note: `UNVALIDATED: ${validation.reason}` },
      });
      if (options.exitWithStdin === true) exitWhenStdinCloses();
      say(`listening on http://${options.host}:${server.port}`);
      progress("booting");
      // The first SIGINT/SIGTERM drains (exit-code.ts calls this); a second one stops at once, exit 2.
      let drained: () => void = () => undefined;
      const stopped = new Promise<void>((resolve) => { drained = resolve; });
      onOrderlyStop((signal) => {
        say(`${signal}: draining in-flight requests`);
        void server.shutdown().then(drained);
      });
      await server.ready;
      say(`ready: ${model.id} (${validation.validated ? `validated by run ${validation.run}` : "UNVALIDATED"}), ${options.slots} slots, queue ${options.queue}${draft === undefined ? "" : `, drafting up to ${options.draftMax} with ${draft.id}`}`);
      await stopped;
      // Drained: the stdin watch is the one handle left, and would hold the process for the CLI's 5 s last resort.
      if (options.exitWithStdin === true) process.stdin.destroy();
      say("drained; bye");
      if (fault === "crash-at-shutdown") process.kill(process.pid, "SIGSEGV");
    });
}
