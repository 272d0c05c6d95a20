import { BenchError } from "../errors.js";
import type { Slo } from "./aggregate.js";
import type { ConversationShape } from "./conversations.js";
import type { LoadMode } from "./run-load.js";

export const DEFAULT_REQUESTS = 32;
export const DEFAULT_WARMUP = 2;

/**
 * A conversation's parts in tokens, and how often a user edits instead of adding a turn: a shared
 * system prompt, short messages and replies, one turn in seven an edit (what bench:conversations
 * measures). Token ids 10–299, inside any vocabulary of 300 tokens or more.
 */
const CONVERSATION = { systemTokens: 96, messageTokens: 24, replyTokens: 16, editEvery: 7, idCeiling: 300 } as const;

/** What `bench load` was asked: its command-line options as commander parsed them. */
export interface LoadOptions {
  readonly url?: string;
  readonly model?: string;
  readonly apiKey?: string;
  readonly endpoint: "completions" | "chat";
  readonly concurrency?: readonly number[];
  readonly rate?: readonly number[];
  readonly burstiness: number;
  /** Undefined: DEFAULT_REQUESTS (a conversations run sends its workload instead). */
  readonly requests?: number;
  /** Undefined: DEFAULT_WARMUP (none in a conversations run). */
  readonly warmup?: number;
  readonly duration?: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly dataset?: string;
  readonly sharedPrefix?: string;
  /** Simulated users, each a conversation coming back after the others (harness/load/conversations.ts). */
  readonly conversations?: number;
  readonly turns: number;
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
  readonly conversations?: ConversationShape;
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
  if (options.requests !== undefined && options.requests < 1) throw new BenchError("a load point needs at least one measured request", { field: "--requests", fix: "use --requests 1 or more" });
  if (options.endpoint !== "completions" && options.endpoint !== "chat") throw new BenchError(`unknown endpoint "${String(options.endpoint)}"`, { field: "--endpoint", fix: "use completions or chat" });
  const conversations = options.conversations === undefined ? undefined : conversationPlan(options);
  const modes: LoadMode[] = conversations !== undefined ? [{ kind: "closed", concurrency: conversations.clients }]
    : options.rate !== undefined ? options.rate.map((rate) => ({ kind: "open", rate, burstiness: options.burstiness }))
      : (options.concurrency ?? [1, 2, 4]).map((concurrency) => ({ kind: "closed", concurrency }));
  return {
    server: options.model !== undefined ? { model: options.model, slots: options.slots } : { url: options.url! },
    apiKey: options.apiKey,
    endpoint: options.endpoint,
    modes,
    requests: conversations?.requests ?? options.requests ?? DEFAULT_REQUESTS,
    warmup: conversations === undefined ? options.warmup ?? DEFAULT_WARMUP : 0,
    durationS: options.duration,
    maxErrorRate: options.maxErrorRate,
    stallTimeoutMs: options.stallTimeout,
    seed: options.seed,
    prompts: { dataset: options.dataset, sharedPrefix: options.sharedPrefix, conversations: conversations?.shape, inputTokens: options.inputTokens, outputTokens: options.outputTokens },
    slo: options.slo ?? {},
    // Accuracy under load needs goldens for the served model: only when we start the server on it.
    paritySuite: options.parity !== false && options.model !== undefined ? options.parity : undefined,
  };
}

/**
 * --conversations: every user's turns in order, each user back after all the others, sent as one
 * closed-loop point whose clients never outnumber the users (then a user's next turn is only sent
 * once the previous one has answered: at most `clients` requests are in flight and they go out in
 * order). The whole workload is measured, with no warm-up: the cache's state is what it measures.
 */
function conversationPlan(options: LoadOptions): { readonly shape: ConversationShape; readonly requests: number; readonly clients: number } {
  const users = options.conversations!;
  const fix = "a conversations run is one closed-loop point: e.g. --conversations 32 --turns 6 --concurrency 4";
  if (users < 1) throw new BenchError("a conversations run needs at least one user", { field: "--conversations", fix });
  if (options.turns < 1) throw new BenchError("a conversation needs at least one turn", { field: "--turns", fix });
  if (options.rate !== undefined) throw new BenchError("an open loop could send a user's next turn before the last one answered", { field: "--rate", fix });
  const clients = options.concurrency ?? [Math.min(4, users)];
  if (clients.length !== 1) throw new BenchError("each concurrency needs a cold cache, so one point per run", { field: "--concurrency", fix: "run one `bench load --conversations` per concurrency" });
  if (clients[0] > users) throw new BenchError(`${clients[0]} clients for ${users} users would send a user's next turn before the last one answered`, { field: "--concurrency", fix: "use at most as many clients as --conversations users" });
  if (options.endpoint !== "completions") throw new BenchError("conversations are sent as token ids, which only the completions endpoint takes", { field: "--endpoint", fix: "use --endpoint completions" });
  for (const [given, field] of [[options.dataset, "--dataset"], [options.sharedPrefix, "--shared-prefix"], [options.requests, "--requests"], [options.warmup, "--warmup"]] as const) {
    if (given !== undefined) throw new BenchError(`${field} does not apply to a conversations run (it sends users × turns requests, none of them a warm-up)`, { field, fix: `drop ${field}` });
  }
  return { shape: { users, turns: options.turns, ...CONVERSATION, seed: options.seed }, requests: users * options.turns, clients: clients[0] };
}
