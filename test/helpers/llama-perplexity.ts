import { spawnSync } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { dirname, join } from "node:path";
import { llamaServerPath } from "../../harness/sut/llama-server-binary.js";

/** llama.cpp's own llama-perplexity, built next to llama-server by scripts/build-llama-server.sh; undefined where it is not built. */
export function builtLlamaPerplexity(): string | undefined {
  const path = join(dirname(llamaServerPath()), "llama-perplexity");
  try {
    accessSync(path, constants.X_OK);
    return path;
  } catch {
    return undefined;
  }
}

const RUNS_BEFORE_GIVING_UP = 5;

/**
 * Runs it in the oracle's numerics (F32 KV, no flash attention, one chunk per batch) and returns
 * stdout and stderr together (its LOG and LOG_INF lines), once they hold `lastLine` (the text of the
 * last line the run prints; a run saving a base file has none to wait for). Under a full test run
 * (load 6–14 on 2 cores) it exits 0 with the tail of its output missing, now and then twice in a
 * row: its log lines go through a worker thread, and llama.cpp leaks that logger on purpose at
 * exit (common/log.cpp, common_log_main), so lines still queued are lost. A run whose output stops
 * short is run again, up to five times (each is a fraction of a second); then it is an error.
 */
export function runLlamaPerplexity(binary: string, args: readonly string[], options: { nCtx: number; threads: number }, lastLine: string | undefined): string {
  const argv = [...args, "-c", String(options.nCtx), "-b", String(options.nCtx), "-t", String(options.threads), "-tb", String(options.threads), "-ctk", "f32", "-ctv", "f32", "-fa", "off", "--no-warmup"];
  let output = "";
  for (let attempt = 1; attempt <= RUNS_BEFORE_GIVING_UP; attempt++) {
    const result = spawnSync(binary, argv, { encoding: "utf8", timeout: 300_000 });
    output = `${result.stdout}\n${result.stderr}`;
    if (result.status !== 0) throw new Error(`llama-perplexity ${argv.join(" ")} exited ${result.status}:\n${output.slice(-2000)}`);
    if (lastLine === undefined || output.includes(lastLine)) return output;
  }
  throw new Error(`llama-perplexity ${argv.join(" ")} exited 0 ${RUNS_BEFORE_GIVING_UP} times without printing "${lastLine}":\n${output.slice(-2000)}`);
}

/** A number as llama-perplexity printed it, with the count of decimals it printed (its precision). */
export interface Printed {
  readonly value: number;
  readonly decimals: number;
}

const printed = (text: string): Printed => ({ value: Number(text), decimals: text.includes(".") ? text.length - text.indexOf(".") - 1 : 0 });

/** `Final estimate: PPL = 12.3456 +/- 0.12345` of a plain perplexity run. */
export function parseFinalEstimate(output: string): { ppl: Printed; stderr: Printed } {
  const match = /Final estimate: PPL = ([\d.]+) \+\/- ([\d.]+)/.exec(output);
  if (match === null) throw new Error(`no "Final estimate" line in llama-perplexity's output:\n${output.slice(-2000)}`);
  return { ppl: printed(match[1]), stderr: printed(match[2]) };
}

/** The `--kl-divergence` report: each line `name : value [± uncertainty] [%]`, keyed by its name as printed. */
export function parseKlDivergenceReport(output: string): Map<string, { value: Printed; uncertainty: Printed | undefined }> {
  const lines = new Map<string, { value: Printed; uncertainty: Printed | undefined }>();
  const start = output.indexOf("====== Perplexity statistics ======");
  if (start < 0) throw new Error(`no statistics in llama-perplexity's output (fewer than 100 positions?):\n${output.slice(-2000)}`);
  for (const line of output.slice(start).split("\n")) {
    const match = /^\s*(.+?)\s*:\s*(-?[\d.]+)(?:%)?(?:\s*±\s*(-?[\d.]+))?\s*%?\s*$/.exec(line);
    if (match !== null) lines.set(match[1].replace(/\s+/g, " "), { value: printed(match[2]), uncertainty: match[3] === undefined ? undefined : printed(match[3]) });
  }
  return lines;
}
