import { performance } from "node:perf_hooks";
import { renderNeedleGrid, type GridCase } from "../niah/grid.js";
import { assertNeedleRepresentable, buildHaystack } from "../niah/haystack.js";
import { needleFromSeed, needleSeed } from "../niah/needle.js";
import { scoreNeedle } from "../niah/score.js";
import type { ResolvedNiahSuite } from "../suites/niah-suite.js";
import { makeCell, runCheck, type ArmScope } from "./check.js";

/** One needle case; `L:depth:trial` is also how `--niah-case` selects it. */
export interface NeedleCase {
  readonly length: number;
  readonly depth: number;
  readonly trial: number;
}

export function needleCases(spec: ResolvedNiahSuite, only?: readonly string[]): NeedleCase[] {
  const all = spec.suite.lengths.flatMap((length) => spec.suite.depths.flatMap((depth) =>
    Array.from({ length: spec.suite.trials }, (_, trial) => ({ length, depth, trial }))));
  return only === undefined ? all : all.filter((c) => only.includes(`${c.length}:${c.depth}:${c.trial}`));
}

export interface NiahArmContext extends ArmScope {
  readonly spec: ResolvedNiahSuite;
  readonly cases: readonly NeedleCase[];
}

/** Runs every needle case of one arm: build the haystack with the SUT's tokenizer, decode greedily, score Y/P/N. */
export async function runNiahArm(context: NiahArmContext): Promise<{ summaryLine: string | undefined }> {
  const { spec, sut } = context;
  const grid: GridCase[] = [];
  await runCheck(context, "niah", "required", ["tokenize", "detokenize", "inspectTokens", "greedy"], async (gate) => {
    const started = performance.now();
    for (const { length, depth, trial } of context.cases) {
      if (context.signal.aborted) break;
      await context.emit({ kind: "progress", message: `${spec.suite.name} · ${context.arm.label} · L=${length} depth=${depth} trial=${trial}` });
      const seed = needleSeed(trial, depth, length);
      const needle = needleFromSeed(seed, spec.needleAlphabet, spec.needleLength);
      await assertNeedleRepresentable(sut, needle, spec.suite.path);
      const haystack = await buildHaystack(sut, spec, needle, length, depth);
      const caseStarted = performance.now();
      const [ids] = await sut.greedy!([{ promptIds: haystack.promptIds, maxTokens: spec.maxTokens }]);
      const caseMs = performance.now() - caseStarted;
      const [output] = await sut.detokenize!([ids]);
      const score = scoreNeedle(output, needle);
      grid.push({ length, depth, score });
      await context.emit({
        kind: "cells",
        cells: [makeCell(context, "niah", gate, {
          status: score === "Y" ? "pass" : "fail", prompt_class: score,
          niah_length: length, niah_depth: depth, niah_trial: trial, niah_seed: seed,
          detail: `${score}: needle ${needle} (seed ${seed}) at token ${haystack.needleOffset}/${haystack.tokens}; output ${JSON.stringify(output)}; ${caseMs.toFixed(0)} ms`,
        }, ` --niah-case ${length}:${depth}:${trial}`)],
      });
    }
    const count = (s: string) => grid.filter((c) => c.score === s).length;
    return {
      status: grid.length > 0 && count("Y") === grid.length ? "pass" : "fail",
      summary: renderNeedleGrid(context.arm.label, grid).split("\n")[0],
      metrics: {
        cases: grid.length, y: count("Y"), p: count("P"), n: count("N"),
        grid: JSON.stringify(grid.map((c) => [c.length, c.depth, c.score])),
        wall_ms: Math.round(performance.now() - started),
      },
    };
  });
  return { summaryLine: grid.length > 0 ? renderNeedleGrid(context.arm.label, grid) : undefined };
}
