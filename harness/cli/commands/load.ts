import { setTimeout as sleep } from "node:timers/promises";
import { InvalidArgumentError, type Command } from "commander";
import { wholeNumber } from "../option-parsers.js";
import { BenchError } from "../../errors.js";
import { resolveModel } from "../../fixtures/registry.js";
import { sha256File } from "../../io/sha256.js";
import { summarizeLoadPoint, type LoadPointSummary, type Slo } from "../../load/aggregate.js";
import { jsonlPrompts, randomPrompts, sharedPrefixPrompts, type LoadPrompt } from "../../load/prompts.js";
import { requestMetrics } from "../../load/request-metrics.js";
import { modeLabel, runLoadPoint, warmupRequests, type LoadMode } from "../../load/run-load.js";
import { encodeSamplesArrow, type SampleRow } from "../../load/samples-arrow.js";
import type { RequestSample, RequestStatus } from "../../load/sse-request.js";
import { parsePrometheusText } from "../../conformance/prometheus.js";
import { RUNS_DIR } from "../../paths.js";
import { EXIT } from "../../results/exit-code.js";
import { exitCodeFor } from "../../results/verdicts.js";
import { loadPointVerdict } from "../../load/point-verdict.js";
import { newRunId, RunDirectory } from "../../results/run-directory.js";
import { httpCall } from "../../sut/http-call.js";
import { startManagedServer, stopManagedServer, type ManagedServer } from "../../sut/managed-server.js";
import { guardRun, setExitCode } from "../exit-code.js";
import { progress, say, warn } from "../output.js";
import { loadVerifiedGoldens } from "../../goldens/verified.js";
import { loadParitySuite } from "../../suites/load.js";
import { openLlamaCppOracle } from "../../oracle/llamacpp-oracle.js";
import { TeacherForcedCache } from "../../oracle/teacher-forced-cache.js";
import { parityUnderLoad } from "../../load/parity-under-load.js";
import { paritySummaryLine, tallyParity } from "../../parity/classify.js";

const list = (value: string): number[] => value.split(",").map((v) => {
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("expected a comma-separated list of positive numbers");
  return n;
});
const positive = (value: string): number => {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError("expected a non-negative number");
  return n;
};


/** --slo ttft=500,tpot=50 (milliseconds). */
function parseSlo(value: string): Slo {
  const slo: { ttftMs?: number; tpotMs?: number } = {};
  for (const part of value.split(",")) {
    const [key, raw] = part.split("=");
    const ms = Number(raw);
    if (!Number.isFinite(ms) || ms <= 0 || (key !== "ttft" && key !== "tpot")) throw new InvalidArgumentError("use ttft=MS,tpot=MS");
    if (key === "ttft") slo.ttftMs = ms;
    else slo.tpotMs = ms;
  }
  return slo;
}

interface LoadOptions {
  url?: string;
  model?: string;
  apiKey?: string;
  endpoint: "completions" | "chat";
  concurrency?: number[];
  rate?: number[];
  burstiness: number;
  requests: number;
  warmup: number;
  duration?: number;
  inputTokens: number;
  outputTokens: number;
  dataset?: string;
  sharedPrefix?: string;
  slo?: Slo;
  maxErrorRate: number;
  stallTimeout: number;
  slots: number;
  seed: number;
  parity: string | false;
  runsDir: string;
  runId?: string;
}

/** Event-loop utilization above which a load point's latencies may be the client's own. */
const CLIENT_BUSY = 0.8;

const fmt = (v: number | undefined, digits = 1) => (v === undefined || !Number.isFinite(v) ? "–" : v.toFixed(digits));

function tableRow(model: string, slots: string, point: LoadPointSummary): string {
  const errors = Object.values(point.errors).reduce((a, b) => a + (b ?? 0), 0);
  return `| ${model} | ${slots} | ${point.label} | ${fmt(point.outputTokensPerSecond)} | ${fmt(point.tokensPerSecondPerUser)} | ${fmt(point.ttftMs?.median)} | ${fmt(point.ttftMs?.p99)} | ${fmt(point.tpotMs?.median, 2)} | ${fmt(point.tpotMs?.p99, 2)} | ${errors} | ${point.validity === undefined ? "–" : point.validity.valid ? "VALID" : "INVALID"} |`;
}

/** One line per kind of failure in a point: how many, and the first one (request index in samples.arrow, its message). */
function failureLines(label: string, samples: readonly RequestSample[]): string[] {
  const byStatus = new Map<RequestStatus, { first: RequestSample; count: number }>();
  for (const sample of samples) {
    if (sample.status === "ok") continue;
    const seen = byStatus.get(sample.status);
    if (seen === undefined) byStatus.set(sample.status, { first: sample, count: 1 });
    else seen.count++;
  }
  return [...byStatus].map(([status, { first, count }]) =>
    `${label}: ${count} × ${status}; first: request ${first.index}${first.httpStatus !== null && first.httpStatus !== 200 ? `, HTTP ${first.httpStatus}` : ""}: ${first.error ?? ""}`);
}

interface ServedModel {
  readonly id: string;
  readonly capabilities?: { readonly tokenize?: boolean };
}

/** The first entry of /v1/models; a server without a usable listing still gets load (model "model"), with a warning. */
function firstServedModel(status: number, text: string): ServedModel | undefined {
  try {
    const first = (JSON.parse(text) as { data?: unknown[] }).data?.[0] as ServedModel | undefined;
    if (status === 200 && typeof first?.id === "string") return first;
  } catch {
    // Not JSON: reported below like any other unusable listing.
  }
  warn(`the server's /v1/models gave no model (HTTP ${status}): requests name the model "model"`, "check --url, or whether this server lists its models");
  return undefined;
}

export function registerLoad(program: Command): void {
  program
    .command("load")
    .description("serving performance: closed-loop concurrency sweeps or open-loop arrival-rate sweeps against an OpenAI-compatible server")
    .option("--url <base>", "an OpenAI-compatible server's base URL (e.g. http://127.0.0.1:8080)")
    .option("--model <model>", "or: start our server on this model (fixture[:QUANT] or .gguf) for the run")
    .option("--api-key <key>", "bearer token for --url")
    .option("--endpoint <kind>", "completions or chat", "completions")
    .option("--concurrency <list>", "closed loop: clients in flight, e.g. 1,2,4,8", list)
    .option("--rate <list>", "open loop: requests per second, e.g. 2,4,8", list)
    .option("--burstiness <b>", "open loop: gamma shape of the arrival gaps (1 = Poisson)", positive, 1)
    .option("--requests <n>", "measured requests per load point", wholeNumber, 32)
    .option("--warmup <n>", "warm-up requests per point, not measured; a closed loop sends at least one per client, at once, so every connection is open before measuring (0: none)", wholeNumber, 2)
    .option("--duration <seconds>", "stop sending after this long (per point)", positive)
    .option("--input-tokens <n>", "random prompts of exactly this many tokens", wholeNumber, 32)
    .option("--output-tokens <n>", "tokens to generate per request (ignore_eos)", wholeNumber, 32)
    .option("--dataset <file.jsonl>", "prompts from a JSONL file instead: {\"prompt\": ..., \"max_tokens\": ...}")
    .option("--shared-prefix <text>", "prompts sharing this prefix (prefix-cache behaviour)")
    .option("--slo <ttft=MS,tpot=MS>", "goodput (requests meeting every SLO, per second), and each point VALID only when TTFT p99 and TPOT p99 meet it and no request failed (MLPerf); informational, the exit code does not change", parseSlo)
    .option("--max-error-rate <fraction>", "stop a point (exit 1) when more requests than this fail", positive, 0.5)
    .option("--stall-timeout <ms>", "a request whose server is silent this long (before its headers or between chunks) fails as a timeout; 0: never", positive, 60_000)
    .option("--slots <n>", "with --model: the server's slots", wholeNumber, 4)
    .option("--seed <n>", "seed for prompts and arrivals", wholeNumber, 1)
    .option("--parity <suite>", "accuracy under load: this parity suite's prompts are sent during every point and must keep their verdicts (with --model)", "parity16")
    .option("--no-parity", "do not inject parity prompts")
    .option("--runs-dir <dir>", "where the run directory goes", RUNS_DIR)
    .option("--run-id <id>", "run directory name")
    .addHelpText("after", "\nMetrics (docs/metrics.md): TTFT to the first content event (never the role-only chunk), TPOT = (E2E − TTFT)/(tokens − 1), inter-chunk gaps, E2E;\nopen-loop latencies count from each request's scheduled send time. Exit: 0, 1 when a point stopped on its error rate, 2 on bad input.")
    .action(async (options: LoadOptions) => {
      if ((options.url === undefined) === (options.model === undefined)) throw new BenchError("give exactly one of --url and --model", { field: "--url/--model", fix: "--url for a running server, --model to start ours" });
      if (options.concurrency !== undefined && options.rate !== undefined) throw new BenchError("--concurrency and --rate are two different load modes", { field: "--concurrency/--rate", fix: "run them as two `bench load` commands" });
      if (options.requests < 1) throw new BenchError("a load point needs at least one measured request", { field: "--requests", fix: "use --requests 1 or more" });
      if (options.endpoint !== "completions" && options.endpoint !== "chat") throw new BenchError(`unknown endpoint "${String(options.endpoint)}"`, { field: "--endpoint", fix: "use completions or chat" });
      const modes: LoadMode[] = options.rate !== undefined
        ? options.rate.map((rate) => ({ kind: "open", rate, burstiness: options.burstiness }))
        : (options.concurrency ?? [1, 2, 4]).map((concurrency) => ({ kind: "closed", concurrency }));
      const recorder = new RunDirectory(options.runId ?? newRunId(), options.runsDir, process.argv.slice(2));
      recorder.provenance.seed = options.seed;
      await recorder.open();
      // No orderly stop mid-point: a signal, an error or a stall ends the run at once, finalised by exit-code.ts.
      const release = guardRun({
        finalise: (status, reason) => recorder.flush(status, EXIT.error, reason),
        finaliseNow: (status, reason) => recorder.finaliseNow(status, reason),
      });
      let managed: ManagedServer | undefined;
      let modelLabel = options.url ?? "";
      try {
        let baseUrl = options.url;
        if (options.model !== undefined) {
          const model = await resolveModel(options.model);
          managed = await startManagedServer({ modelPath: model.path, slots: options.slots, queue: 256, contextSize: Math.max(256, options.inputTokens + options.outputTokens + 64), threads: 1, flashAttention: false, bootTimeoutS: 600, onProgress: progress });
          baseUrl = managed.baseUrl;
          modelLabel = model.id;
          recorder.provenance.suts.push({ suite: "load", arm: model.id, provenance: { kind: "http", modelPath: model.path, modelSha256: await sha256File(model.path), engine: "bringup-bench server", settings: { slots: options.slots } } });
        }
        const listing = await httpCall(`${baseUrl}/v1/models`, { apiKey: options.apiKey }).catch((error: Error) => {
          throw new BenchError(`cannot reach the server (${error.message})`, { field: "--url", fix: "start the server, or check the address" });
        });
        const served = firstServedModel(listing.status, listing.text);
        const modelId = served?.id ?? "model";
        const canTokenize = served?.capabilities?.tokenize === true;
        const total = options.requests + Math.max(...modes.map((mode) => warmupRequests({ mode, warmup: options.warmup }).count));
        const prompts: LoadPrompt[] = options.dataset !== undefined ? jsonlPrompts(options.dataset, options.outputTokens)
          : options.sharedPrefix !== undefined ? sharedPrefixPrompts(total, options.sharedPrefix, options.outputTokens)
            : await randomPrompts(total, options.inputTokens, options.outputTokens, options.seed,
              canTokenize ? async (text) => JSON.parse((await httpCall(`${baseUrl}/tokenize`, { body: { content: text }, apiKey: options.apiKey })).text).tokens as number[] : undefined);
        const body = (i: number) => {
          const p = prompts[i % prompts.length];
          const common = { model: modelId, max_tokens: p.maxTokens, temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true } };
          return options.endpoint === "chat" ? { ...common, messages: [{ role: "user", content: typeof p.prompt === "string" ? p.prompt : "" }] } : { ...common, prompt: p.prompt };
        };
        const url = `${baseUrl}/v1/${options.endpoint === "chat" ? "chat/completions" : "completions"}`;
        // Accuracy under load needs goldens for the served model: only when we started the server on it.
        let parity: { goldens: Awaited<ReturnType<typeof loadVerifiedGoldens>>["goldens"]; cache: TeacherForcedCache; close: () => Promise<void>; band: number; k: number } | undefined;
        if (options.parity !== false && options.model !== undefined) {
          const suite = loadParitySuite(options.parity);
          const served = await resolveModel(options.model);
          if ((await resolveModel(suite.oracle.model)).path === served.path) {
            const { goldens, oracleModel } = await loadVerifiedGoldens(suite);
            const oracle = await openLlamaCppOracle(oracleModel);
            parity = { goldens, cache: new TeacherForcedCache(oracle), close: () => oracle.close(), band: suite.band_mnats, k: suite.top_k };
          } else {
            warn(`no parity under load: ${options.parity}'s goldens are for ${suite.oracle.model}, the server runs ${served.id}`);
          }
        }
        const rows: SampleRow[] = [];
        const lines = ["| model | slots | load | output tok/s | tok/s/user | TTFT p50 (ms) | TTFT p99 (ms) | TPOT p50 (ms) | TPOT p99 (ms) | errors | SLO p99 |", "|---|---|---|---|---|---|---|---|---|---|---|"];
        let errorStop = false;
        for (const [pointIndex, mode] of modes.entries()) {
          const label = modeLabel(mode);
          const scrape = async () => parsePrometheusText((await httpCall(`${baseUrl}/metrics`)).text);
          const before = await scrape().catch(() => undefined);
          const running = runLoadPoint({ url, apiKey: options.apiKey, body, stallTimeoutMs: options.stallTimeout }, {
            mode, requests: options.requests, warmup: options.warmup, durationS: options.duration, maxErrorRate: options.maxErrorRate, seed: options.seed + pointIndex,
          }, (done, all) => progress(`${label}: ${done}/${all} requests`));
          // Sent once the point is under way (after its warm-up), so the prompts share batches with the load.
          const underLoad = parity === undefined ? undefined : sleep(50)
            .then(() => parityUnderLoad(baseUrl!, options.apiKey, parity!.goldens, parity!.cache, parity!.band, parity!.k));
          // The server's gauges, sampled while the point runs (slots busy, queue depth, in flight).
          const gauges: Record<string, number>[] = [];
          const startedMs = Date.now();
          const sampler = setInterval(() => {
            void scrape().then((m) => gauges.push({ t_ms: Date.now() - startedMs, slots_active: m.get("bench_slots_active") ?? NaN, queue_depth: m.get("bench_queue_depth") ?? NaN, in_flight: m.get("bench_in_flight") ?? NaN })).catch(() => undefined);
          }, 250);
          const [result, parityResults] = await Promise.all([running, underLoad]).finally(() => clearInterval(sampler));
          const after = await scrape().catch(() => undefined);
          const metrics = result.samples.map(requestMetrics);
          const summary = summarizeLoadPoint(label, result.samples, metrics, result.durationS, options.slo ?? {});
          const serverDeltas = before === undefined || after === undefined ? null : Object.fromEntries(
            [...after.entries()].filter(([name]) => name.endsWith("_total")).map(([name, value]) => [name, value - (before.get(name) ?? 0)]));
          recorder.provenance.load.push({ label, mode, stopped_by: result.stoppedBy, summary, client: result.client, server_metrics_delta: serverDeltas, server_gauges_during: gauges });
          if (result.client.eventLoopUtilization > CLIENT_BUSY) {
            warn(`${label}: the client was busy ${(100 * result.client.eventLoopUtilization).toFixed(0)}% of the time (event-loop delay p99 ${result.client.eventLoopDelayP99Ms.toFixed(1)} ms): these numbers may measure the client, not the server`,
              "`npm run bench:client` shows what one client core sustains; lower the load (with --model, --no-parity also moves the oracle's work out of the client process)");
          }
          rows.push(...result.samples.map((sample, i) => ({ point: label, sample, metrics: metrics[i] })));
          recorder.setSamples(encodeSamplesArrow(rows));
          const line = tableRow(modelLabel, options.model !== undefined ? String(options.slots) : "–", summary);
          lines.push(line);
          const pointVerdict = loadPointVerdict(label, result.stoppedBy, summary);
          if (pointVerdict.status !== "pass") say(`${label}: ${pointVerdict.status === "skip" ? `SKIPPED — NOT A PASS: ${pointVerdict.reason}` : `FAIL: ${"summary" in pointVerdict ? pointVerdict.summary : pointVerdict.reason}`}`);
          await recorder.record({
            kind: "verdict",
            verdict: pointVerdict,
          });
          let parityLine: string | undefined;
          if (parityResults !== undefined) {
            const tally = tallyParity(parityResults);
            parityLine = paritySummaryLine(`${label} parity under load`, tally);
            await recorder.record({ kind: "verdict", verdict: { suite: "load", arm: label, check: "parity_under_load", gate: "required", status: tally.forwardDivergent === 0 ? "pass" : "fail", summary: parityLine,
              metrics: { strict: tally.strict, near_tie: tally.nearTie, forward_divergent: tally.forwardDivergent, max_gap_mnats: tally.maxGapMnats } } });
            if (tally.forwardDivergent > 0) errorStop = true;
          }
          await recorder.record({ kind: "arm-end", suite: "load", arm: label, summaryLine: parityLine });
          say(line);
          for (const failure of failureLines(label, result.samples)) say(failure);
          if (summary.retriedOnFreshConnection > 0) say(`${label}: ${summary.retriedOnFreshConnection} request(s) sent again on a fresh connection (the server closed a kept-alive connection as they went out; docs/load-client.md); each counted once`);
          if (summary.validity?.valid === false) say(`${label}: INVALID under --slo: ${summary.validity.reasons.join("; ")}`);
          if (parityLine !== undefined) say(parityLine);
          if (result.stoppedBy === "error-rate") { errorStop = true; break; }
        }
        await parity?.close();
        // From the verdicts written: a point that measured nothing fails (or skips) the run like any gate.
        const code = exitCodeFor(recorder.allVerdicts());
        await recorder.flush("complete", code);
        release();
        say(["", ...lines].join("\n"));
        const ending = errorStop ? "FAIL: a load point stopped on its error rate, or parity failed under load"
          : code === EXIT.pass ? "done" : code === EXIT.requiredSkipped ? "SKIPPED — NOT A PASS: a load point measured nothing" : "FAIL: a load point's numbers cannot pass (see its line above)";
        say(`${ending} (exit ${code}) — results in ${recorder.directory}`);
        setExitCode(code);
      } finally {
        if (managed !== undefined) await stopManagedServer(managed);
      }
    });
}
