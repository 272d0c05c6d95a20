import { performance } from "node:perf_hooks";
import { BenchError } from "../../../errors.js";
import { renderNeedleGrid } from "../../../niah/grid.js";
import { assertNeedleRepresentable, buildHaystack } from "../../../niah/haystack.js";
import { needleFromSeed, needleSeed } from "../../../niah/needle.js";
import { scoreNeedle } from "../../../niah/score.js";
import type { CellRecord } from "../../../results/types.js";
import { askGreedy } from "../../../sut/answer-shape.js";
import { endsTheSut } from "../../../sut/with-timeout.js";
import { ErrorsInCells, makeCell, type CheckOutcome } from "../../check.js";
import { gridLabel, type NiahCheck } from "./niah-arm-state.js";

/** Every needle case of the arm: build the haystack with the SUT's tokenizer, decode greedily, score Y/P/N. */
export const needleCheck: NiahCheck<"niah"> = {
  kind: "niah",
  name: "niah",
  needs: ["tokenize", "detokenize", "inspectTokens", "greedy"],
  level: () => "required",
  async run({ context, grid }, gate): Promise<CheckOutcome> {
    const { spec, sut } = context;
    if (context.cases.length === 0) {
      const reason = `no needle case to run in ${spec.suite.name}: an empty grid cannot fail`;
      await context.emit({ kind: "cells", cells: [makeCell(context, "niah", gate, { status: "skip", detail: reason })] });
      return { status: "skip", reason };
    }
    const started = performance.now();
    let errored = 0;
    let stoppedBy: string | undefined;
    for (const { length, depth, trial } of context.cases) {
      if (context.signal.aborted) break;
      await context.emit({ kind: "progress", message: `${spec.suite.name} · ${context.arm.label} · L=${length} depth=${depth} trial=${trial}` });
      const seed = needleSeed(trial, depth, length);
      const needle = needleFromSeed(seed, spec.needleAlphabet, spec.needleLength);
      const caseCell = (fields: Pick<CellRecord, "status" | "detail"> & Partial<CellRecord>) => makeCell(context, "niah", gate, {
        niah_length: length, niah_depth: depth, niah_trial: trial, niah_seed: seed, ...fields,
      }, ` --niah-case ${length}:${depth}:${trial}`);
      try {
        // Inside the case: a runner that times out here is replaced and the next case still runs; bad input (a BenchError naming the suite) still ends the run.
        await assertNeedleRepresentable(sut, needle, spec.suite.path);
        const haystack = await buildHaystack(sut, spec, needle, length, depth);
        const caseStarted = performance.now();
        const [answer] = await askGreedy(sut, "greedy", [{ promptIds: haystack.promptIds, maxTokens: spec.maxTokens }]);
        const caseMs = performance.now() - caseStarted;
        if (!answer.ok) {
          grid.push({ length, depth, score: "N" });
          await context.emit({ kind: "cells", cells: [caseCell({ status: "fail", prompt_class: "N", detail: `greedy answer rejected: ${answer.reason}` })] });
          continue;
        }
        const [output] = await sut.detokenize!([answer.value]);
        const score = scoreNeedle(output, needle);
        grid.push({ length, depth, score });
        await context.emit({
          kind: "cells",
          cells: [caseCell({
            status: score === "Y" ? "pass" : "fail", prompt_class: score,
            detail: `${score}: needle ${needle} (seed ${seed}) at token ${haystack.needleOffset}/${haystack.tokens}; output ${JSON.stringify(output)}; ${caseMs.toFixed(0)} ms`,
          })],
        });
      } catch (error) {
        if (error instanceof BenchError && error.file !== undefined) throw error;
        // The error belongs to this case (L, depth, trial, seed kept); the others still run unless the SUT is gone or stopped answering (a runner that stopped answering was replaced: they run).
        errored++;
        const reason = error instanceof Error ? error.message : String(error);
        await context.emit({ kind: "cells", cells: [caseCell({ status: "error", detail: reason })] });
        if (endsTheSut(error)) {
          stoppedBy = reason;
          break;
        }
      }
    }
    if (errored > 0) {
      throw new ErrorsInCells(`${errored} needle case(s) errored${stoppedBy === undefined ? "" : `; the others did not run: ${stoppedBy}`} (see their cells)`);
    }
    // Stopped before its first case: nothing was scored, so nothing passed or failed.
    if (grid.length === 0) return { status: "skip", reason: "the run was stopped before the first needle case" };
    const count = (s: string) => grid.filter((c) => c.score === s).length;
    return {
      status: count("Y") === grid.length ? "pass" : "fail",
      summary: renderNeedleGrid(gridLabel(context), grid).split("\n")[0],
      metrics: {
        cases: grid.length, y: count("Y"), p: count("P"), n: count("N"),
        grid: JSON.stringify(grid.map((c) => [c.length, c.depth, c.score])),
        wall_ms: Math.round(performance.now() - started),
      },
    };
  },
};
