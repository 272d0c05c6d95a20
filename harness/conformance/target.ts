import { request } from "undici";
import { httpCall } from "../sut/http-call.js";
import type { ManagedServer } from "../sut/managed-server.js";
import type { LogprobTolerance } from "./greedy-logprobs.js";
import type { TextReference } from "./text-reference.js";
import { parsePrometheusText } from "./prometheus.js";

/*
 * What every conformance check shares: the server it is held against, its result, and the requests
 * the checks send (each under the target's signal, so a check given up on leaves nothing open).
 */

/** What a conformance check gets: the server's base URL, the model id, and what the harness saw at boot. */
export interface ConformanceTarget {
  readonly baseUrl: string;
  readonly model: string;
  readonly apiKey?: string;
  /** The bounds the arm declares for the server (ours); absent for a server whose limits the harness does not know. */
  readonly slots?: number;
  readonly queue?: number;
  /** Prometheus series the server promises; none: any valid exposition with samples passes. */
  readonly expectMetrics: readonly string[];
  readonly managed?: ManagedServer;
  /** The served file's own vocabulary, which the text checks hold the server's text to (text-reference.ts), or why there is none; absent where the suite asks no text check. */
  readonly textReference?: TextReference | string;
  /** How far two reports of one log-prob may differ on this server (the arm's `logprob_tolerance`); absent: float32's default. */
  readonly logprobTolerance?: LogprobTolerance;
  /** Aborts every request a check has in flight: the check was given up on (per-case timeout) or its arm stopped. */
  readonly signal?: AbortSignal;
}

export type CheckResult = { readonly status: "pass" | "fail" | "skip"; readonly detail: string };

/** One conformance check: what it asks the server, and its result (one cell of the arm's conformance verdict). */
export type ConformanceCheck = (target: ConformanceTarget) => Promise<CheckResult>;

/** A group of checks by name (one file under ./groups/, registered in ./checks.ts). */
export type ConformanceGroup = Readonly<Record<string, ConformanceCheck>>;

export const pass = (detail: string): CheckResult => ({ status: "pass", detail });
export const fail = (detail: string): CheckResult => ({ status: "fail", detail });

export async function post(target: ConformanceTarget, path: string, body: unknown) {
  return httpCall(`${target.baseUrl}${path}`, { body, apiKey: target.apiKey, signal: target.signal });
}

export async function metrics(target: ConformanceTarget): Promise<Map<string, number>> {
  return parsePrometheusText((await httpCall(`${target.baseUrl}/metrics`, { signal: target.signal })).text);
}

/** Reads an SSE response, stamping each event; stops after `stopAfter` events when given (then drops the connection). */
export async function readEvents(target: ConformanceTarget, path: string, body: unknown, stopAfter?: number): Promise<{ status: number; events: string[]; raw: string }> {
  const controller = new AbortController();
  const signal = target.signal === undefined ? controller.signal : AbortSignal.any([controller.signal, target.signal]);
  const response = await request(`${target.baseUrl}${path}`, {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal,
  });
  let raw = "";
  const events: string[] = [];
  try {
    for await (const chunk of response.body) {
      raw += (chunk as Buffer).toString();
      let cut: number;
      while ((cut = raw.indexOf("\n\n")) >= 0) {
        events.push(raw.slice(0, cut));
        raw = raw.slice(cut + 2);
      }
      if (stopAfter !== undefined && events.length >= stopAfter) {
        controller.abort();
        break;
      }
    }
  } catch (error) {
    if (stopAfter === undefined || target.signal?.aborted === true) throw error;
  }
  return { status: response.statusCode, events, raw };
}

export const isCompletion = (text: string): boolean => {
  try {
    return typeof (JSON.parse(text) as { choices?: { text?: unknown }[] }).choices?.[0]?.text === "string";
  } catch {
    return false;
  }
};

export const isErrorObject = (text: string): boolean => {
  try {
    const error = (JSON.parse(text) as { error?: { message?: unknown; type?: unknown } }).error;
    return typeof error?.message === "string" && typeof error.type === "string";
  } catch {
    return false;
  }
};

export type Choice = { index?: number; text?: string; finish_reason?: string | null; message?: { content?: string }; delta?: { content?: string }; logprobs?: unknown };
export type Completion = { choices?: Choice[]; usage?: { completion_tokens?: number } };

export async function postJson(target: ConformanceTarget, path: string, body: Record<string, unknown>): Promise<{ status: number; json: Completion & Record<string, unknown> }> {
  const response = await post(target, path, { model: target.model, ...body });
  try {
    return { status: response.status, json: JSON.parse(response.text) as Completion & Record<string, unknown> };
  } catch {
    return { status: response.status, json: {} };
  }
}

/** The streamed text of choice 0 (completions `text`, chat `delta.content`). */
export async function streamedText(target: ConformanceTarget, path: string, body: Record<string, unknown>): Promise<string> {
  const { events } = await readEvents(target, path, { model: target.model, ...body, stream: true });
  return events.filter((e) => e !== "data: [DONE]").map((e) => JSON.parse(e.slice(6)) as Completion)
    .flatMap((e) => e.choices ?? []).filter((c) => (c.index ?? 0) === 0).map((c) => c.text ?? c.delta?.content ?? "").join("");
}

/** The log-prob entries a streamed chat answer's data events carry (`choices[].logprobs.content`), in order. */
export function streamedChatLogprobs<T>(dataEvents: readonly string[]): T[] {
  return dataEvents.map((e) => JSON.parse(e.slice(6)) as { choices?: { logprobs?: { content?: T[] } | null }[] })
    .flatMap((e) => e.choices ?? []).flatMap((c) => c.logprobs?.content ?? []);
}
