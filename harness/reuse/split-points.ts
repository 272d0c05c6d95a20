import { BenchError } from "../errors.js";

/** What a split point is measured against: the arm's ubatch, and the model's sliding window (none: not a sliding-window model). */
export interface SplitUnits {
  readonly ubatch: number;
  readonly window: number | undefined;
}

/** A split point resolved for one arm, with the expression it came from (kept in cell labels and failures). */
export interface SplitPoint {
  readonly expression: string;
  readonly k: number;
}

const EXPRESSION = /^(?:(\d+)|(?:(\d+)\*)?(ubatch|window)([+-]\d+)?)$/;

/**
 * Resolves the suite's split points (`N`, `ubatch`, `2*ubatch+1`, `window-1`) for one arm, in
 * suite order, duplicates dropped. A `window` point on a model without a sliding window, and a
 * `ubatch` point past the prompt (an arm that prefills whole prompts), do not apply and are
 * returned in `notApplicable`; a literal point outside 1..promptTokens-1 is bad input.
 */
export function resolveSplitPoints(expressions: readonly string[], units: SplitUnits, promptTokens: number, file: string): { points: SplitPoint[]; notApplicable: string[] } {
  const points: SplitPoint[] = [];
  const notApplicable: string[] = [];
  for (const expression of expressions) {
    const match = EXPRESSION.exec(expression);
    if (match === null) throw new BenchError(`split point ${JSON.stringify(expression)} is not N, ubatch or window with an optional factor and offset`, { file, field: "split_points", fix: "write e.g. 5, ubatch, ubatch+1, 2*ubatch+3, window" });
    let k: number;
    if (match[1] !== undefined) k = Number(match[1]);
    else {
      const unit = match[3] === "ubatch" ? units.ubatch : units.window;
      if (unit === undefined) {
        notApplicable.push(expression);
        continue;
      }
      k = Number(match[2] ?? 1) * unit + Number(match[4] ?? 0);
    }
    if (match[1] === undefined && k >= promptTokens) {
      notApplicable.push(`${expression} (${k})`);
      continue;
    }
    if (!Number.isInteger(k) || k < 1 || k >= promptTokens) {
      throw new BenchError(`split point ${expression} is ${k} tokens here, outside 1..${promptTokens - 1} (prompt_tokens ${promptTokens}, ubatch ${units.ubatch}${units.window === undefined ? "" : `, window ${units.window}`})`, { file, field: "split_points", fix: "raise prompt_tokens or lower the split point" });
    }
    if (!points.some((p) => p.k === k)) points.push({ expression, k });
  }
  return { points, notApplicable };
}
