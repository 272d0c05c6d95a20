import { BenchError } from "../errors.js";
import type { Slo } from "./aggregate.js";
import type { LoadMode } from "./run-load.js";

/** What `bench load` was asked: its command-line options as commander parsed them. */
export interface LoadOptions {
  readonly url?: string;
  readonly model?: string;
  readonly apiKey?: string;
  readonly endpoint: "completions" | "chat";
  readonly concurrency?: readonly number[];
  readonly rate?: readonly number[];
  readonly burstiness: number;
  readonly requests: number;
  readonly warmup: number;
  readonly duration?: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly dataset?: string;
  readonly sharedPrefix?: string;
  readonly slo?: Slo;
  readonly maxErrorRate: number;
  readonly stallTimeout: number;
  readonly slots: number;
  readonly seed: number;
  readonly parity: string | false;
  readonly runsDir: string;
  readonly runId?: string;
}

/** Where a load run's prompts come from: a JSONL file, one shared prefix, or random prompts of an exact token length. */
export interface PromptSource {
  readonly dataset?: string;
  readonly sharedPrefix?: string;
  readonly inputTokens: number;
  readonly outputTokens: number;
}

/** A load run as it will go: its server, its points in order, and what each point sends. */
export interface LoadPlan {
  /** A running server's base URL, or a model our server is started on for the run (with its slots). */
  readonly server: { readonly url: string } | { readonly model: string; readonly slots: number };
  readonly apiKey: string | undefined;
  readonly endpoint: "completions" | "chat";
  /** One load point per mode: closed-loop concurrencies, or open-loop arrival rates. */
  readonly modes: readonly LoadMode[];
  readonly requests: number;
  readonly warmup: number;
  readonly durationS: number | undefined;
  readonly maxErrorRate: number;
  readonly stallTimeoutMs: number;
  readonly seed: number;
  readonly prompts: PromptSource;
  readonly slo: Slo;
  /** The parity suite whose prompts are sent during every point; only on a server started here, whose model its goldens may be for. */
  readonly paritySuite: string | undefined;
}

/** Options → plan: every option checked together (bad input is a one-line error before anything starts). */
export function planLoad(options: LoadOptions): LoadPlan {
  if ((options.url === undefined) === (options.model === undefined)) throw new BenchError("give exactly one of --url and --model", { field: "--url/--model", fix: "--url for a running server, --model to start ours" });
  if (options.concurrency !== undefined && options.rate !== undefined) throw new BenchError("--concurrency and --rate are two different load modes", { field: "--concurrency/--rate", fix: "run them as two `bench load` commands" });
  if (options.requests < 1) throw new BenchError("a load point needs at least one measured request", { field: "--requests", fix: "use --requests 1 or more" });
  if (options.endpoint !== "completions" && options.endpoint !== "chat") throw new BenchError(`unknown endpoint "${String(options.endpoint)}"`, { field: "--endpoint", fix: "use completions or chat" });
  const modes: LoadMode[] = options.rate !== undefined
    ? options.rate.map((rate) => ({ kind: "open", rate, burstiness: options.burstiness }))
    : (options.concurrency ?? [1, 2, 4]).map((concurrency) => ({ kind: "closed", concurrency }));
  return {
    server: options.model !== undefined ? { model: options.model, slots: options.slots } : { url: options.url! },
    apiKey: options.apiKey,
    endpoint: options.endpoint,
    modes,
    requests: options.requests,
    warmup: options.warmup,
    durationS: options.duration,
    maxErrorRate: options.maxErrorRate,
    stallTimeoutMs: options.stallTimeout,
    seed: options.seed,
    prompts: { dataset: options.dataset, sharedPrefix: options.sharedPrefix, inputTokens: options.inputTokens, outputTokens: options.outputTokens },
    slo: options.slo ?? {},
    // Accuracy under load needs goldens for the served model: only when we start the server on it.
    paritySuite: options.parity !== false && options.model !== undefined ? options.parity : undefined,
  };
}
