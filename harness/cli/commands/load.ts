import { InvalidArgumentError, type Command } from "commander";
import { wholeNumber } from "../option-parsers.js";
import type { Slo } from "../../load/aggregate.js";
import { runLoad } from "../../load/load-run.js";
import { DEFAULT_REQUESTS, DEFAULT_WARMUP, planLoad, type LoadOptions } from "../../load/plan.js";
import { RUNS_DIR } from "../../paths.js";
import { EXIT } from "../../results/exit-code.js";
import { newRunId, RunDirectory } from "../../results/run-directory.js";
import { guardRun, setExitCode } from "../exit-code.js";
import { progress, say, warn } from "../output.js";

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

/**
 * The load pipeline (harness/load/): options → plan (plan.ts) → per point, run → aggregate →
 * report (load-run.ts). Here only the run directory around it: a signal, an error or a stall ends
 * the run at once (no orderly stop mid-point), finalised by exit-code.ts.
 */
async function load(options: LoadOptions): Promise<void> {
  const plan = planLoad(options);
  const recorder = new RunDirectory(options.runId ?? newRunId(), options.runsDir, process.argv.slice(2));
  recorder.provenance.seed = plan.seed;
  await recorder.open();
  const release = guardRun({
    finalise: (status, reason) => recorder.flush(status, EXIT.error, reason),
    finaliseNow: (status, reason) => recorder.finaliseNow(status, reason),
  });
  const outcome = await runLoad(plan, recorder, { progress, warn, say });
  await recorder.flush("complete", outcome.code);
  release();
  say(["", ...outcome.table].join("\n"));
  say(`${outcome.ending} (exit ${outcome.code}) — results in ${recorder.directory}`);
  setExitCode(outcome.code);
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
    .option("--requests <n>", `measured requests per load point (default ${DEFAULT_REQUESTS})`, wholeNumber)
    .option("--warmup <n>", `warm-up requests per point, not measured; a closed loop sends at least one per client, at once, so every connection is open before measuring (0: none; default ${DEFAULT_WARMUP})`, wholeNumber)
    .option("--duration <seconds>", "stop sending after this long (per point)", positive)
    .option("--input-tokens <n>", "random prompts of exactly this many tokens", wholeNumber, 32)
    .option("--output-tokens <n>", "tokens to generate per request (ignore_eos)", wholeNumber, 32)
    .option("--dataset <file.jsonl>", "prompts from a JSONL file instead: {\"prompt\": ..., \"max_tokens\": ...}")
    .option("--shared-prefix <text>", "prompts sharing this prefix (prefix-cache behaviour)")
    .option("--conversations <users>", "the prompt cache at scale: this many simulated users, each conversation (a shared system prompt, a message and a reply a turn, one turn in seven an edit) coming back after all the others; one closed-loop point of at most as many clients as users", wholeNumber)
    .option("--turns <n>", "with --conversations: turns per user", wholeNumber, 6)
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
    .action(load);
}
