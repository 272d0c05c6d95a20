import { REUSE_SCENARIOS, type ReuseScenarioKind } from "../suites/reuse-suite.js";
import type { PromptCounters } from "../sut/types.js";

/** One final request as efficacy sees it: what the server says it reused, what it could have, and how long hit and cold took. */
export interface ReuseMeasurement {
  readonly kind: ReuseScenarioKind;
  readonly label: string;
  /** Undefined: the server did not say how long the prompt it rendered was (a chat request). */
  readonly promptTokens: number | undefined;
  readonly reusable: number;
  readonly cached: number | undefined;
  readonly hitMs: number;
  readonly coldMs: number;
  readonly hitPromptMs: number | undefined;
  readonly coldPromptMs: number | undefined;
}

/** Per scenario kind: totals over its final requests. `fraction` is cached / reusable over the requests the server reported on. */
export interface KindEfficacy {
  readonly kind: ReuseScenarioKind;
  readonly requests: number;
  readonly reported: number;
  readonly cached: number;
  readonly reusable: number;
  readonly fraction: number | null;
  readonly hitMs: number;
  readonly coldMs: number;
  readonly hitPromptMs: number | null;
  readonly coldPromptMs: number | null;
}

export type EfficacyOutcome =
  | { readonly status: "pass" | "fail"; readonly summary: string; readonly metrics: Record<string, number | string | null> }
  | { readonly status: "skip"; readonly reason: string };

function sumOrNull(values: readonly (number | undefined)[]): number | null {
  return values.some((v) => v === undefined) || values.length === 0 ? null : values.reduce<number>((s, v) => s + v!, 0);
}

function efficacyByKind(measurements: readonly ReuseMeasurement[]): KindEfficacy[] {
  return REUSE_SCENARIOS.map((kind) => measurements.filter((m) => m.kind === kind)).filter((rows) => rows.length > 0).map((rows) => {
    const reported = rows.filter((m) => m.cached !== undefined);
    const cached = reported.reduce((s, m) => s + m.cached!, 0);
    const reusable = reported.reduce((s, m) => s + m.reusable, 0);
    return {
      kind: rows[0].kind, requests: rows.length, reported: reported.length, cached, reusable,
      fraction: reported.length === 0 ? null : reusable === 0 ? 1 : cached / reusable,
      hitMs: rows.reduce((s, m) => s + m.hitMs, 0), coldMs: rows.reduce((s, m) => s + m.coldMs, 0),
      hitPromptMs: sumOrNull(rows.map((m) => m.hitPromptMs)), coldPromptMs: sumOrNull(rows.map((m) => m.coldPromptMs)),
    };
  });
}

/** Metric names keep to [a-z0-9_]: `multi-turn` becomes `multi_turn`. */
const metricKey = (kind: ReuseScenarioKind) => kind.replaceAll("-", "_");

const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;

/**
 * A server's cache claims held to its own counters over the arm's requests: every prompt token it
 * admitted was either taken from its cache or evaluated. A server that reports hits it then
 * re-prefills (or evaluates less than it admitted without calling it cached) breaks the identity.
 */
export function countersDisagree(before: PromptCounters | undefined, after: PromptCounters | undefined): string | undefined {
  if (before === undefined || after === undefined) return undefined;
  const [total, cached, evaluated] = [after.total - before.total, after.cached - before.cached, after.evaluated - before.evaluated];
  if (total === cached + evaluated) return undefined;
  return `the server's own counters disagree with its cache reports: over this arm it admitted ${total} prompt tokens, reports ${cached} taken from its cache and ${evaluated} evaluated (${cached + evaluated} ≠ ${total}): cached tokens it did not reuse, or reuse it did not report`;
}

/**
 * The efficacy verdict. A server that reports no cached tokens at all cannot be measured (SKIPPED).
 * A report of more cached tokens than the prompt holds is false (fail). With `expect` declared, every
 * declared kind must reach its fraction; a declared kind the server did not report on fails.
 */
export function efficacyOutcome(measurements: readonly ReuseMeasurement[], expect: Partial<Record<ReuseScenarioKind, number>> | undefined, counters?: string): EfficacyOutcome {
  if (measurements.length === 0) return { status: "skip", reason: "no scenario ran to its last request" };
  if (measurements.every((m) => m.cached === undefined)) return { status: "skip", reason: "the server reports no cached prompt tokens (usage.prompt_tokens_details.cached_tokens, timings.cache_n): reuse cannot be measured" };
  const kinds = efficacyByKind(measurements);
  const problems = measurements.filter((m) => m.cached !== undefined && m.promptTokens !== undefined && m.cached >= m.promptTokens)
    .map((m) => `${m.label}: reports ${m.cached} cached of a ${m.promptTokens}-token prompt (at least the last token must be evaluated)`);
  if (counters !== undefined) problems.push(counters);
  for (const [kind, least] of Object.entries(expect ?? {}) as [ReuseScenarioKind, number][]) {
    const measured = kinds.find((k) => k.kind === kind);
    if (measured === undefined || measured.fraction === null) problems.push(`${kind}: declared ${least}, ${measured === undefined ? "not run" : "not reported"}`);
    else if (measured.fraction < least) problems.push(`${kind}: reused ${measured.cached}/${measured.reusable} = ${measured.fraction.toFixed(3)} < declared ${least}`);
  }
  const metrics: Record<string, number | string | null> = {};
  for (const k of kinds) {
    const key = metricKey(k.kind);
    Object.assign(metrics, {
      [`cached_${key}`]: k.cached, [`reusable_${key}`]: k.reusable, [`reuse_${key}`]: k.fraction === null ? null : round(k.fraction, 4),
      [`hit_ms_${key}`]: round(k.hitMs, 1), [`cold_ms_${key}`]: round(k.coldMs, 1),
      [`hit_prompt_ms_${key}`]: k.hitPromptMs === null ? null : round(k.hitPromptMs, 2), [`cold_prompt_ms_${key}`]: k.coldPromptMs === null ? null : round(k.coldPromptMs, 2),
    });
  }
  const table = kinds.map((k) => `${k.kind} ${k.fraction === null ? "not reported" : `${k.cached}/${k.reusable}`} (${k.hitMs.toFixed(0)} vs ${k.coldMs.toFixed(0)} ms)`).join(", ");
  return {
    status: problems.length === 0 ? "pass" : "fail",
    summary: `cached/reusable, last request hit vs cold: ${table}${problems.length === 0 ? "" : `; FAIL: ${problems.join("; ")}`}`,
    metrics: { ...metrics, cached: kinds.reduce((s, k) => s + k.cached, 0), reusable: kinds.reduce((s, k) => s + k.reusable, 0) },
  };
}
