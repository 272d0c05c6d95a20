import { DEFAULT_LOGPROB_TOLERANCE, describeTolerance, judgeGreedyToken, largestGap, logprobsAgree, rankedDescending, isTopTie, type LogprobTolerance, type ReportedToken } from "../greedy-logprobs.js";
import { fail, pass, postJson, readEvents, streamedChatLogprobs, type CheckResult, type ConformanceGroup, type ConformanceTarget } from "../target.js";

/** What the log-probs of greedy tokens say, not only their shape (../greedy-logprobs.ts judges them). */
export const GREEDY_LOGPROB_CHECKS: ConformanceGroup = {
  greedy_logprobs: greedyLogprobs,
  greedy_logprobs_echo: greedyLogprobsEcho,
};

/** Alternatives asked for per greedy token, and tokens generated per request, in the greedy log-prob checks. */
const GREEDY_TOP = 5;
const GREEDY_TOKENS = 12;

/**
 * Greedy requests sent at once, so that a step decodes several sequences and a server that ranks
 * another sequence's row is seen: four, or what a server declares it holds without a 429.
 */
function greedyConcurrency(target: ConformanceTarget): number {
  return target.slots === undefined ? 4 : Math.min(4, target.slots + (target.queue ?? 0));
}

type ChatEntry = { token?: unknown; logprob?: unknown; top_logprobs?: { token?: unknown; logprob?: unknown }[] };

/** A chat `logprobs.content` list as reports; undefined where an entry is not the documented shape. */
function chatReports(content: readonly ChatEntry[] | undefined): ReportedToken[] | undefined {
  if (content === undefined) return undefined;
  const reports = content.map((e) => (typeof e.token === "string" && typeof e.logprob === "number" && Array.isArray(e.top_logprobs)
    && e.top_logprobs.every((a) => typeof a.token === "string" && typeof a.logprob === "number")
    ? { token: e.token, logprob: e.logprob, top: e.top_logprobs as { token: string; logprob: number }[] } : undefined));
  return reports.every((r) => r !== undefined) ? reports as ReportedToken[] : undefined;
}

/** Every report judged greedy-consistent (with `topCount` alternatives each, where the shape keeps them all); problems prefixed with where they are. */
function judgeAll(label: string, reports: readonly ReportedToken[], topCount: number | undefined, tolerance: LogprobTolerance): { problems: string[]; decided: number } {
  const verdicts = reports.map((report) => judgeGreedyToken(report, topCount, tolerance));
  return {
    problems: verdicts.flatMap((v, i) => v.problems.map((p) => `${label} token ${i}: ${p}`)),
    decided: verdicts.filter((v) => v.decided).length,
  };
}

/** A greedy check's verdict from what it found, its detail ending with the tolerance it judged by and the largest gap it saw, so an arm can set its tolerance from evidence. */
function greedyVerdict(problems: readonly string[], skipped: string | undefined, passed: string, tolerance: LogprobTolerance, gaps: readonly (readonly [number, number])[]): CheckResult {
  const evidence = `; ${describeTolerance(tolerance)}, largest gap ${largestGap(gaps).toExponential(1)} nats`;
  if (problems.length > 0) return fail(problems.slice(0, 4).join("; ") + (problems.length > 4 ? `; and ${problems.length - 4} more` : "") + evidence);
  if (skipped !== undefined) return { status: "skip", detail: skipped + evidence };
  return pass(passed + evidence);
}

/**
 * Chat greedy tokens with `logprobs` + `top_logprobs`, several prompts at once, streamed and not:
 * each token is its own top-1 with its top-1's log-prob, each top list sorted with a mass ≤ 1, and
 * the streamed tokens and log-probs are the non-streamed ones. SKIPPED when every position is a tie.
 */
async function greedyLogprobs(target: ConformanceTarget): Promise<CheckResult> {
  const tolerance = target.logprobTolerance ?? DEFAULT_LOGPROB_TOLERANCE;
  const prompts = ["Tell me about rivers", "Count to ten", "What is the weather", "Name three colours"].slice(0, greedyConcurrency(target));
  const body = (content: string) => ({ messages: [{ role: "user", content }], max_tokens: GREEDY_TOKENS, temperature: 0, logprobs: true, top_logprobs: GREEDY_TOP });
  const plain = await Promise.all(prompts.map((p) => postJson(target, "/v1/chat/completions", body(p))));
  const streamed = await Promise.all(prompts.map(async (p) => {
    const { status, events } = await readEvents(target, "/v1/chat/completions", { model: target.model, ...body(p), stream: true });
    const entries = streamedChatLogprobs<ChatEntry>(events.filter((e) => e.startsWith("data: {")));
    return { status, reports: chatReports(entries) };
  }));
  const problems: string[] = [];
  let decided = 0;
  let tokens = 0;
  const gaps: [number, number][] = [];
  for (const [n, prompt] of prompts.entries()) {
    const label = JSON.stringify(prompt);
    const { status, json } = plain[n];
    const reports = chatReports((json.choices?.[0] as { logprobs?: { content?: ChatEntry[] } } | undefined)?.logprobs?.content);
    if (status !== 200 || reports === undefined || reports.length !== json.usage?.completion_tokens) {
      problems.push(`${label}: status ${status}, ${reports?.length ?? "no"} log-prob entries in the documented shape for ${json.usage?.completion_tokens} tokens`);
      continue;
    }
    const judged = judgeAll(label, reports, GREEDY_TOP, tolerance);
    problems.push(...judged.problems);
    decided += judged.decided;
    tokens += reports.length;
    const stream = streamed[n];
    if (stream.status !== 200 || stream.reports === undefined) {
      problems.push(`${label} streamed: status ${stream.status}, log-prob entries not in the documented shape`);
      continue;
    }
    problems.push(...judgeAll(`${label} streamed`, stream.reports, GREEDY_TOP, tolerance).problems);
    if (stream.reports.map((r) => r.token).join("\u0000") !== reports.map((r) => r.token).join("\u0000")) {
      problems.push(`${label}: streamed tokens ${JSON.stringify(stream.reports.map((r) => r.token).join(""))}, not streamed ${JSON.stringify(reports.map((r) => r.token).join(""))}`);
      continue;
    }
    reports.forEach((r, i) => {
      gaps.push([r.logprob, stream.reports![i].logprob]);
      if (!logprobsAgree(r.logprob, stream.reports![i].logprob, tolerance)) problems.push(`${label} token ${i}: log-prob ${r.logprob} not streamed, ${stream.reports![i].logprob} streamed`);
    });
  }
  return greedyVerdict(problems, decided === 0 ? `all ${tokens} greedy tokens sit at a top-1 tie: whether each is its own top-1 cannot be decided` : undefined,
    `${prompts.length} chat prompts at once, ${tokens} greedy tokens: each its own top-1 with the top-1's log-prob (${decided} decided, ${tokens - decided} at a tie), top-${GREEDY_TOP} sorted with mass ≤ 1; streamed equals not streamed`, tolerance, gaps);
}

type LegacyLogprobs = { tokens?: string[]; token_logprobs?: (number | null)[]; top_logprobs?: (Record<string, number> | null)[] };

/** A legacy completions `logprobs` object as reports (its top lists are objects, so they are ranked here); undefined where not that shape. */
function legacyReports(lp: LegacyLogprobs | undefined): (ReportedToken | undefined)[] | undefined {
  if (!Array.isArray(lp?.tokens) || !Array.isArray(lp.token_logprobs) || !Array.isArray(lp.top_logprobs) || lp.token_logprobs.length !== lp.tokens.length || lp.top_logprobs.length !== lp.tokens.length) return undefined;
  return lp.tokens.map((token, i) => {
    const logprob = lp.token_logprobs![i];
    const top = lp.top_logprobs![i];
    return typeof logprob === "number" && top !== null && typeof top === "object" ? { token, logprob, top: rankedDescending(top) } : undefined;
  });
}

/**
 * Teacher forcing through another code path: greedy completions of several prompts at once with
 * `logprobs`, then each prompt + its generated text sent back with `echo` + `logprobs` +
 * `max_tokens: 0`. Each generated token's log-prob must be what the server scores for it there,
 * and the echo's top-1 at that position the generated token (lm-eval's is_greedy). SKIPPED where
 * the server does not score an echoed prompt, or re-tokenizes the text differently, or every
 * position is a tie.
 */
async function greedyLogprobsEcho(target: ConformanceTarget): Promise<CheckResult> {
  const tolerance = target.logprobTolerance ?? DEFAULT_LOGPROB_TOLERANCE;
  const prompts = ["The model runs", "Roses are red", "Once upon a", "Hello there"].slice(0, greedyConcurrency(target));
  const echo = (prompt: string) => postJson(target, "/v1/completions", { prompt, max_tokens: 0, echo: true, logprobs: GREEDY_TOP, temperature: 0 });
  const probe = await echo(prompts[0]);
  const probed = legacyReports(probe.json.choices?.[0]?.logprobs as LegacyLogprobs | undefined);
  if (probe.status !== 200 || probed === undefined || !(probe.json.choices?.[0]?.text ?? "").endsWith(prompts[0])) {
    return { status: "skip", detail: `the server does not score an echoed prompt (echo + logprobs ${GREEDY_TOP} + max_tokens 0: status ${probe.status}, no token_logprobs over the prompt), so its greedy log-probs cannot be teacher-forced through it` };
  }
  const generated = await Promise.all(prompts.map((prompt) => postJson(target, "/v1/completions", { prompt, max_tokens: GREEDY_TOKENS, temperature: 0, logprobs: GREEDY_TOP })));
  const problems: string[] = [];
  const unaligned: string[] = [];
  const gaps: [number, number][] = [];
  let decided = 0;
  let tokens = 0;
  for (const [n, prompt] of prompts.entries()) {
    const label = JSON.stringify(prompt);
    const choice = generated[n].json.choices?.[0];
    const reports = legacyReports(choice?.logprobs as LegacyLogprobs | undefined);
    if (generated[n].status !== 200 || reports === undefined || reports.some((r) => r === undefined) || reports.length !== generated[n].json.usage?.completion_tokens) {
      problems.push(`${label}: status ${generated[n].status}, no token_logprobs with top_logprobs for each of ${generated[n].json.usage?.completion_tokens} generated tokens`);
      continue;
    }
    const own = reports as ReportedToken[];
    const judged = judgeAll(label, own, undefined, tolerance);
    problems.push(...judged.problems);
    const text = own.map((r) => r.token).join("");
    if (choice?.text !== text) problems.push(`${label}: the tokens spell ${JSON.stringify(text)}, the text is ${JSON.stringify(choice?.text)}`);
    const scored = await echo(prompt + text);
    const all = legacyReports(scored.json.choices?.[0]?.logprobs as LegacyLogprobs | undefined);
    const tail = own.length === 0 ? [] : all?.slice(-own.length);
    if (scored.status !== 200 || all === undefined || tail!.some((r, i) => r?.token !== own[i].token)) {
      unaligned.push(label);
      continue;
    }
    tokens += own.length;
    own.forEach((r, i) => {
      const forced = tail![i]!;
      gaps.push([r.logprob, forced.logprob]);
      if (!logprobsAgree(r.logprob, forced.logprob, tolerance)) problems.push(`${label} token ${i} ${JSON.stringify(r.token)}: generated with log-prob ${r.logprob}, echo scores it ${forced.logprob}`);
      if (isTopTie(forced.top, tolerance)) return;
      decided++;
      if (forced.top[0].token !== r.token) problems.push(`${label} token ${i}: echo's top-1 there is ${JSON.stringify(forced.top[0].token)}, greedy generated ${JSON.stringify(r.token)}`);
    });
  }
  const skipped = tokens === 0 ? `no prompt's echo re-tokenized its generated text into the generated tokens (${unaligned.join(", ")}): nothing to compare`
    : decided === 0 ? `all ${tokens} teacher-forced positions sit at a top-1 tie` : undefined;
  return greedyVerdict(problems, skipped, `${prompts.length} prompts at once, ${tokens} greedy tokens: each log-prob what echo scores for it, echo's top-1 the generated token at ${decided} untied positions${unaligned.length > 0 ? `; ${unaligned.length} prompt(s) re-tokenized otherwise, not compared: ${unaligned.join(", ")}` : ""}`, tolerance, gaps);
}
