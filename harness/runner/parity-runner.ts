import { basename } from "node:path";
import { performance } from "node:perf_hooks";
import { teacherForcedAccuracy, type OracleRow, type TeacherForcedAccuracy } from "../accuracy/teacher-forced.js";
import { describeBound, holdToBounds } from "../accuracy/distribution-bounds.js";
import { classifyPrompt, paritySummaryLine, tallyParity, type PromptParity } from "../parity/classify.js";
import { modelConfigDifferences } from "../parity/model-config-diff.js";
import { resolveModel } from "../fixtures/registry.js";
import type { Goldens } from "../goldens/goldens.js";
import type { TeacherForcedCache } from "../oracle/teacher-forced-cache.js";
import type { CellRecord, CheckName } from "../results/types.js";
import type { DistributionBounds, GateLevel, ParitySuite, SuiteArm } from "../suites/parity-suite.js";
import { hasCapability, type Capability, type TokenId, type TopK } from "../sut/types.js";
import { askGreedy, askTeacherForced, type Checked } from "../sut/answer-shape.js";
import { ErrorsInCells, makeCell, runCheck, type ArmScope, type CheckOutcome } from "./check.js";
import { identityOutcome } from "./identity.js";

/** Teacher-forced top-1 accuracy below this fails the teacher_forced check (tt-metal gates on top-1/top-5). */
export const DEFAULT_MIN_TOP1 = 0.9;

export interface ParityArmContext extends ArmScope {
  readonly suite: ParitySuite;
  readonly arm: Pick<SuiteArm, "label" | "gate" | "distribution">;
  readonly goldens: Goldens;
  readonly oracle: TeacherForcedCache;
  /** Prompt indices to run (all by default). */
  readonly prompts: readonly number[];
  /** The oracle's vocabulary size: a SUT compared against its goldens answers with ids below it. */
  readonly vocabSize: number;
}

/** A prompt whose answer had the wrong shape (failed with the reason) or never came (errored: its runner timed out), kept out of the scorers. */
interface BrokenAnswer {
  readonly prompt: number;
  readonly reason: string;
  readonly errored?: boolean;
}

/** Splits checked answers into the prompts' valid values and the broken ones. */
function sortAnswers<T>(prompts: readonly number[], answers: readonly Checked<T>[]): { valid: Map<number, T>; broken: BrokenAnswer[] } {
  const valid = new Map<number, T>();
  const broken: BrokenAnswer[] = [];
  answers.forEach((answer, i) => {
    if (answer.ok) valid.set(prompts[i], answer.value);
    else broken.push({ prompt: prompts[i], reason: answer.reason, errored: answer.errored === true });
  });
  return { valid, broken };
}

function cell(context: ParityArmContext, check: CheckName, gate: GateLevel, fields: Partial<CellRecord> & Pick<CellRecord, "status" | "detail">): CellRecord {
  return makeCell(context, check, gate, fields, fields.prompt === undefined || fields.prompt === null ? "" : ` --prompt ${fields.prompt}`);
}

/** Classifies SUT paths against the goldens, teacher-forcing the oracle only where they differ. */
async function classifyPaths(context: ParityArmContext, paths: ReadonlyMap<number, readonly TokenId[]>): Promise<PromptParity[]> {
  const { goldens, suite } = context;
  const divergent = [...paths.entries()].filter(([p, ids]) => ids.join(",") !== goldens.greedyIds[p].join(","));
  const rows = await context.oracle.rows(divergent.map(([p, ids]) => ({ promptIds: goldens.promptIds[p], continuationIds: ids, k: Math.max(goldens.manifest.K, suite.top_k) })));
  const oracleRows = new Map(divergent.map(([p], i) => [p, rows[i]]));
  return [...paths.entries()].map(([p, ids]) => classifyPrompt(p, goldens.greedyIds[p], ids, suite.band_mnats, oracleRows.get(p)));
}

/**
 * The SUT must run the artifact its goldens were made from. An informational arm that names
 * another artifact on purpose (a quantization held to F32 goldens) must run the one it names.
 */
function parityIdentity(context: ParityArmContext, gate: GateLevel): Promise<CheckOutcome> {
  const { sut, arm, goldens } = context;
  const goldensModel = goldens.manifest.model;
  const armModel = sut.provenance.modelSha256 === undefined ? undefined : { file: basename(sut.provenance.modelPath ?? "(unnamed)"), sha256: sut.provenance.modelSha256 };
  const ownArtifact = arm.gate === "informational" && armModel !== undefined && armModel.sha256 !== goldensModel.sha256;
  const expected = ownArtifact ? { ...armModel, what: "the model the arm names" } : { file: goldensModel.file, sha256: goldensModel.sha256, what: `the goldens' model (${goldensModel.id})` };
  return identityOutcome(context, gate, expected, ownArtifact ? `the model the arm names, held to the goldens of ${goldensModel.id}` : "the goldens' artifact");
}

/** A SUT's teacher-forced answers to every selected prompt, scored against the goldens' top-k. */
interface TeacherForcedScores {
  readonly scored: readonly number[];
  readonly rows: readonly (readonly TopK[])[];
  readonly oracle: readonly (readonly OracleRow[])[];
  readonly accuracy: TeacherForcedAccuracy;
  readonly broken: readonly BrokenAnswer[];
}

/** Why these goldens cannot score teacher forcing, if they cannot. */
function goldensLackLogprobs(goldens: Goldens): string | undefined {
  if (goldens.topkIds !== undefined && goldens.topkLogprobs !== undefined) return undefined;
  return `the goldens hold no log-probs (K = ${goldens.manifest.K}, oracle ${goldens.manifest.oracle.name}): teacher-forced accuracy and KLD need the oracle's top-k`;
}

async function scoreTeacherForced(context: ParityArmContext): Promise<TeacherForcedScores> {
  const { goldens, sut } = context;
  const answers = await askTeacherForced(sut, context.prompts.map((p) => ({ promptIds: goldens.promptIds[p], continuationIds: goldens.greedyIds[p], k: goldens.manifest.K })), context.vocabSize);
  const { valid, broken } = sortAnswers(context.prompts, answers);
  const scored = context.prompts.filter((p) => valid.has(p));
  const rows = scored.map((p) => valid.get(p)!);
  const oracle = scored.map((p) => goldens.topkIds![p].map((ids, t) => ({ ids, logprobs: goldens.topkLogprobs![p][t] })));
  return { scored, rows, oracle, accuracy: teacherForcedAccuracy(scored.map((p) => goldens.greedyIds[p]), oracle, rows), broken };
}

function rejectedClause(broken: readonly BrokenAnswer[], prompts: number): string {
  return broken.length === 0 ? "" : `; ${broken.length}/${prompts} prompts' answers rejected (prompt ${broken[0].prompt}: ${broken[0].reason})`;
}

/** The arm's distribution bounds: the suite's, each replaced by the arm's own where it sets one. */
function armDistributionBounds(suite: ParitySuite, arm: Pick<SuiteArm, "distribution">): DistributionBounds {
  const { gate: _level, ...suiteBounds } = suite.checks.distribution ?? { gate: "informational" };
  return { ...suiteBounds, ...arm.distribution };
}

function brokenCells(context: ParityArmContext, check: CheckName, gate: GateLevel, method: string, broken: readonly BrokenAnswer[]): CellRecord[] {
  return broken.map(({ prompt, reason, errored }) => cell(context, check, gate, errored === true ? { prompt, status: "error", detail: reason } : { prompt, status: "fail", detail: `${method} answer rejected: ${reason}` }));
}

function parityCells(context: ParityArmContext, check: CheckName, gate: GateLevel, results: readonly PromptParity[]): CellRecord[] {
  return results.flatMap((result) => result.cells.map((c) => cell(context, check, gate, {
    prompt: result.prompt, position: c.position, status: c.withinBand ? "pass" : "fail",
    expected_id: c.expectedId, observed_id: c.observedId, gap_mnats: c.gapMnats, gap_lower_bound: c.lowerBound, prompt_class: result.verdict,
    detail: c.expectedId === c.observedId ? "match" : `gap ${c.gapMnats}${c.lowerBound ? "+ (outside oracle top-k)" : ""} mnats`,
  })));
}

/**
 * Runs every check of one arm. A check whose capability is missing is SKIPPED with the reason;
 * a check that throws becomes an error verdict; the other checks still run.
 */
export async function runParityArm(armContext: ParityArmContext): Promise<{ summaryLine: string | undefined }> {
  // The error cells a check records (prompts whose runner timed out and was replaced) make its verdict an error: the check did not see every answer.
  let erroredCells: CellRecord[] = [];
  const context: ParityArmContext = {
    ...armContext,
    emit: (event) => {
      if (event.kind === "cells") erroredCells.push(...event.cells.filter((c) => c.status === "error"));
      return armContext.emit(event);
    },
  };
  const { suite, arm, sut, goldens, emit } = context;
  const T = goldens.manifest.T;
  let aloneIds: Map<number, TokenId[]> | undefined;
  let summaryLine: string | undefined;

  const check = (name: CheckName, level: GateLevel | undefined, needs: readonly Capability[], body: (gate: GateLevel) => Promise<CheckOutcome>) =>
    runCheck(context, name, level, needs, async (gate) => {
      erroredCells = [];
      const outcome = await body(gate);
      if (erroredCells.length > 0) throw new ErrorsInCells(`${erroredCells.length} prompt(s) errored (prompt ${erroredCells[0].prompt}: ${erroredCells[0].detail}); see their cells`);
      return outcome;
    });

  // Always asked, and first: every other verdict of the arm is about the artifact this one names.
  await check("identity", "required", [], async (gate) => parityIdentity(context, gate));

  await check("tokenizer", suite.checks.tokenizer, ["tokenize"], async (gate) => {
    const ids = await sut.tokenize!(context.prompts.map((p) => suite.prompts[p]));
    const drifted = context.prompts.filter((p, i) => ids[i].join(",") !== goldens.promptIds[p].join(","));
    await emit({
      kind: "cells",
      cells: context.prompts.map((p, i) => {
        const at = ids[i].findIndex((id, j) => id !== goldens.promptIds[p][j]);
        return cell(context, "tokenizer", gate, {
          prompt: p, status: drifted.includes(p) ? "fail" : "pass",
          position: drifted.includes(p) ? (at < 0 ? ids[i].length : at) : null,
          expected_id: drifted.includes(p) ? (goldens.promptIds[p][at < 0 ? ids[i].length : at] ?? null) : null,
          observed_id: drifted.includes(p) && at >= 0 ? ids[i][at] : null,
          detail: drifted.includes(p) ? "the SUT's tokenizer gives other prompt ids than the oracle's" : "same prompt ids as the goldens",
        });
      }),
    });
    return {
      status: drifted.length === 0 ? "pass" : "fail",
      summary: `${arm.label} tokenizer: ${context.prompts.length - drifted.length}/${context.prompts.length} prompts tokenize to the goldens' ids`,
      metrics: { prompts: context.prompts.length, drifted: drifted.length },
    };
  });

  await check("greedy_parity", suite.checks.greedy_parity, ["greedy"], async (gate) => {
    const started = performance.now();
    const answers = await askGreedy(sut, "greedy", context.prompts.map((p) => ({ promptIds: goldens.promptIds[p], maxTokens: T })), context.vocabSize);
    const greedyMs = performance.now() - started;
    const { valid, broken } = sortAnswers(context.prompts, answers);
    const generated = [...valid.values()].reduce((sum, row) => sum + row.length, 0);
    aloneIds = valid;
    const results = await classifyPaths(context, valid);
    await emit({ kind: "cells", cells: [...parityCells(context, "greedy_parity", gate, results), ...brokenCells(context, "greedy_parity", gate, "greedy", broken)] });
    const tally = tallyParity(results, broken.length);
    summaryLine = paritySummaryLine(arm.label, tally, arm.gate === "informational");
    const configDifferences = tally.forwardDivergent > 0 && sut.provenance.modelPath !== undefined
      ? modelConfigDifferences(sut.provenance.modelPath, (await resolveModel(goldens.manifest.model.id)).path)
      : [];
    return {
      status: tally.forwardDivergent === 0 && tally.rejected === 0 ? "pass" : "fail",
      summary: summaryLine + (configDifferences.length === 0 ? "" : `; the SUT's model file differs from the oracle's in ${configDifferences.join(", ")}`),
      metrics: {
        prompts: tally.prompts, strict: tally.strict, near_tie: tally.nearTie, forward_divergent: tally.forwardDivergent, rejected: tally.rejected,
        max_gap_mnats: tally.maxGapMnats, max_gap_prompt: tally.maxGapAt?.prompt ?? null, max_gap_position: tally.maxGapAt?.position ?? null,
        band_mnats: suite.band_mnats,
        ...(configDifferences.length === 0 ? {} : { config_differences: configDifferences.join("; ") }),
        // Batch-1 speed of this check's own greedy pass (prompt evaluation included): a single-sequence perf row.
        greedy_ms: Math.round(greedyMs * 1000) / 1000,
        generated_tokens: generated,
        ms_per_token: generated === 0 ? null : greedyMs / generated,
        tokens_per_second: generated === 0 ? null : generated / (greedyMs / 1000),
      },
    };
  });

  // One teacher-forced pass serves both checks that score it: the distribution gate costs no SUT time.
  let teacherForced: Promise<TeacherForcedScores> | undefined;
  const scoreTeacherForcedOnce = () => (teacherForced ??= scoreTeacherForced(context));

  await check("teacher_forced", suite.checks.teacher_forced, ["teacherForcedTopK"], async (gate): Promise<CheckOutcome> => {
    const missing = goldensLackLogprobs(goldens);
    if (missing !== undefined) {
      await emit({ kind: "cells", cells: [cell(context, "teacher_forced", gate, { status: "skip", detail: missing })] });
      return { status: "skip", reason: missing };
    }
    const { scored, rows, oracle, accuracy, broken } = await scoreTeacherForcedOnce();
    await emit({
      kind: "cells",
      cells: [...scored.flatMap((p, i) => rows[i].map((row, t) => cell(context, "teacher_forced", gate, {
        prompt: p, position: t, status: row.ids[0] === oracle[i][t].ids[0] ? "pass" : "fail",
        expected_id: oracle[i][t].ids[0], observed_id: row.ids[0],
        detail: oracle[i][t].ids.slice(0, 5).includes(row.ids[0]) ? "in reference top-5" : "outside reference top-5",
      }))), ...brokenCells(context, "teacher_forced", gate, "teacher-forced top-k", broken)],
    });
    const rejected = rejectedClause(broken, context.prompts.length);
    if (scored.length === 0) {
      return { status: "fail", summary: `${arm.label} teacher-forced: no prompt could be scored${rejected}`, metrics: { positions: 0, rejected: broken.length, min_top1: DEFAULT_MIN_TOP1 } };
    }
    const kld = accuracy.kldTopK;
    const summary = `${arm.label} teacher-forced: top-1 ${(accuracy.top1.p * 100).toFixed(2)}%, top-5 ${(accuracy.top5.p * 100).toFixed(2)}% over ${accuracy.positions} positions; ` +
      `KLD (top-${goldens.manifest.K} support, tail bounded) mean ${kld?.mean.toExponential(3)} ± ${kld?.stderr?.toExponential(2) ?? "n/a"}; RMS Δp ${(accuracy.rmsDeltaP * 100).toFixed(3)}%${rejected}`;
    return {
      status: broken.length === 0 && accuracy.top1.p >= DEFAULT_MIN_TOP1 ? "pass" : "fail",
      summary,
      metrics: {
        positions: accuracy.positions, top1: accuracy.top1.p, top1_stderr: accuracy.top1.stderr ?? null, top5: accuracy.top5.p,
        same_top: accuracy.sameTop.p, kld_topk_mean: kld?.mean ?? null, kld_topk_stderr: kld?.stderr ?? null, kld_topk_max: kld?.max ?? null,
        kld_topk_p99: kld?.p99 ?? null, kld_topk_median: kld?.median ?? null, kld_floored_terms: accuracy.kldFlooredTerms,
        delta_p_mean: accuracy.deltaP?.mean ?? null, delta_p_stderr: accuracy.deltaP?.stderr ?? null, rms_delta_p: Number.isNaN(accuracy.rmsDeltaP) ? null : accuracy.rmsDeltaP,
        min_top1: DEFAULT_MIN_TOP1, rejected: broken.length,
      },
    };
  });

  await check("distribution", suite.checks.distribution?.gate, ["teacherForcedTopK"], async (gate): Promise<CheckOutcome> => {
    const bounds = armDistributionBounds(suite, arm);
    const cannot = goldensLackLogprobs(goldens) ?? (Object.keys(bounds).length === 0 ? "no distribution bound is set for this arm (checks.distribution in the suite, or the arm's distribution)" : undefined);
    if (cannot !== undefined) {
      await emit({ kind: "cells", cells: [cell(context, "distribution", gate, { status: "skip", detail: cannot })] });
      return { status: "skip", reason: cannot };
    }
    const { scored, accuracy, broken } = await scoreTeacherForcedOnce();
    const results = holdToBounds(accuracy, bounds);
    await emit({
      kind: "cells",
      cells: [...results.map((r) => cell(context, "distribution", gate, { status: r.ok ? "pass" : "fail", detail: describeBound(r) })), ...brokenCells(context, "distribution", gate, "teacher-forced top-k", broken)],
    });
    const failed = results.filter((r) => !r.ok);
    return {
      status: failed.length === 0 && broken.length === 0 && scored.length > 0 ? "pass" : "fail",
      summary: `${arm.label} distribution over ${accuracy.positions} teacher-forced positions: ${results.map(describeBound).join("; ")}${rejectedClause(broken, context.prompts.length)}`,
      metrics: {
        positions: accuracy.positions, failed_bounds: failed.length, rejected: broken.length,
        ...Object.fromEntries(results.flatMap((r) => [[r.bound, r.limit], [`${r.bound}_measured`, r.value]])),
      },
    };
  });

  const determinism = suite.checks.determinism;
  await check("determinism", determinism?.gate, ["greedy"], async (gate) => {
    const reruns = determinism!.reruns;
    const requests = context.prompts.map((p) => ({ promptIds: goldens.promptIds[p], maxTokens: T }));
    // Each rerun's answers, by prompt; the greedy_parity pass counts as the first when it ran.
    const runs: Map<number, TokenId[]>[] = aloneIds === undefined ? [] : [aloneIds];
    const broken: BrokenAnswer[] = [];
    while (runs.length < reruns) {
      const sorted = sortAnswers(context.prompts, await askGreedy(sut, "greedy", requests, context.vocabSize));
      runs.push(sorted.valid);
      broken.push(...sorted.broken.filter((b) => !broken.some((seen) => seen.prompt === b.prompt)));
    }
    let logprobBytesDiffer = 0;
    if (hasCapability(sut, "teacherForcedTopK")) {
      const tf = () => sut.teacherForcedTopK!(context.prompts.map((p) => ({ promptIds: goldens.promptIds[p], continuationIds: goldens.greedyIds[p], k: 5 })));
      const [a, b] = [await tf(), await tf()];
      const bytes = (rows: typeof a) => Buffer.from(Float32Array.from(rows.flat().flatMap((row) => row.logprobs)).buffer).toString("hex");
      logprobBytesDiffer = a.map((_, i) => bytes([a[i]]) !== bytes([b[i]])).filter(Boolean).length;
    }
    const scored = context.prompts.filter((p) => !broken.some((b) => b.prompt === p) && runs.every((run) => run.has(p)));
    const unstable = scored.filter((p) => runs.some((run) => run.get(p)!.join(",") !== runs[0].get(p)!.join(",")));
    await emit({
      kind: "cells",
      cells: [...scored.map((p) => cell(context, "determinism", gate, {
        prompt: p, status: unstable.includes(p) ? "fail" : "pass",
        detail: unstable.includes(p) ? `ids differ across ${reruns} reruns` : `identical ids across ${reruns} reruns`,
      })), ...brokenCells(context, "determinism", gate, "greedy", broken)],
    });
    const ok = unstable.length === 0 && broken.length === 0 && logprobBytesDiffer === 0;
    return {
      status: ok ? "pass" : "fail",
      summary: `${arm.label} determinism: ${scored.length - unstable.length}/${context.prompts.length} prompts identical over ${reruns} reruns` +
        (broken.length === 0 ? "" : `, ${broken.length} answers rejected`) +
        (hasCapability(sut, "teacherForcedTopK") ? `; log-prob bytes ${logprobBytesDiffer === 0 ? "identical" : `differ on ${logprobBytesDiffer} prompts`}` : "") +
        (unstable.length === 0 && logprobBytesDiffer === 0 ? "" : " — the same request gives other answers: state leaking from earlier requests (a reused slot whose KV or recurrent/conv state was not cleared) or a race"),
      metrics: { reruns, unstable_prompts: unstable.length, rejected: broken.length, logprob_bytes_differ: logprobBytesDiffer },
    };
  });

  /**
   * Every prompt's greedy answer through `method` beside its answer alone (the greedy check's when
   * it ran): the prompts that could be compared, those whose ids changed, and the broken ones — a
   * prompt with no valid answer on either path cannot be compared and fails with the reason.
   */
  const againstAlone = async (method: "batchedGreedy" | "tracedGreedy", aloneRejected: string) => {
    const requests = context.prompts.map((p) => ({ promptIds: goldens.promptIds[p], maxTokens: T }));
    const reference = aloneIds ?? sortAnswers(context.prompts, await askGreedy(sut, "greedy", requests, context.vocabSize)).valid;
    const { valid: other, broken } = sortAnswers(context.prompts, await askGreedy(sut, method, requests, context.vocabSize));
    for (const p of context.prompts) {
      if (!reference.has(p) && !broken.some((b) => b.prompt === p)) broken.push({ prompt: p, reason: aloneRejected });
    }
    const compared = context.prompts.filter((p) => !broken.some((b) => b.prompt === p));
    const changed = new Map(compared.map((p) => [p, other.get(p)!] as const).filter(([p, ids]) => ids.join(",") !== reference.get(p)!.join(",")));
    return { reference, compared, changed, broken };
  };

  await check("batch_invariance", suite.checks.batch_invariance, ["greedy", "batchedGreedy"], async (gate): Promise<CheckOutcome> => {
    if (context.prompts.length < 2) {
      const reason = `one prompt selected: B=1 against B=1 cannot fail (select two or more prompts, e.g. --prompt ${context.prompts[0] ?? 0} --prompt ${context.prompts[0] === 0 ? 1 : 0})`;
      await emit({ kind: "cells", cells: [cell(context, "batch_invariance", gate, { status: "skip", detail: reason })] });
      return { status: "skip", reason };
    }
    const { reference: alone, compared, changed, broken } = await againstAlone("batchedGreedy", "its greedy answer alone was rejected");
    const classified = await classifyPaths(context, changed);
    // A difference is only a near-tie if neither path left the band: a batched path that matches the
    // goldens while the alone path diverged (a slot that kept the previous request's state) is the
    // SUT answering by history, and fails here as it does in greedy_parity.
    const aloneClassified = await classifyPaths(context, new Map([...changed.keys()].map((p) => [p, alone.get(p)!])));
    const aloneDivergent = new Set(aloneClassified.filter((r) => r.verdict === "FORWARD-DIVERGENT").map((r) => r.prompt));
    const bad = classified.filter((r) => r.verdict === "FORWARD-DIVERGENT" || aloneDivergent.has(r.prompt));
    await emit({
      kind: "cells",
      cells: [...compared.map((p) => {
        const result = classified.find((r) => r.prompt === p);
        return cell(context, "batch_invariance", gate, {
          prompt: p, status: result !== undefined && bad.includes(result) ? "fail" : "pass",
          gap_mnats: result?.maxGapMnats ?? 0, prompt_class: result === undefined ? "IDENTICAL" : result.verdict,
          detail: result === undefined ? `identical alone and in a batch of ${context.prompts.length}` : `batched ids differ from alone at token ${result.cells.findIndex((c, j) => c.observedId !== alone.get(p)![j])}; max gap ${result.maxGapMnats} mnats` +
            (aloneDivergent.has(p) ? "; the alone path is forward-divergent from the goldens" : ""),
        });
      }), ...brokenCells(context, "batch_invariance", gate, "batched greedy", broken)],
    });
    return {
      status: bad.length === 0 && broken.length === 0 ? "pass" : "fail",
      summary: `${arm.label} batch invariance (B=1 vs B=${context.prompts.length}): ${compared.length - changed.size}/${context.prompts.length} identical, ` +
        `${changed.size - bad.length} near-tie, ${bad.length} forward-divergent` + (broken.length === 0 ? "" : `, ${broken.length} answers rejected`),
      metrics: { batch: context.prompts.length, identical: compared.length - changed.size, near_tie: changed.size - bad.length, forward_divergent: bad.length, rejected: broken.length },
    };
  });

  await check("capture_parity", suite.checks.capture_parity, ["greedy", "tracedGreedy"], async (gate) => {
    const { reference: eager, compared, changed, broken } = await againstAlone("tracedGreedy", "its eager greedy answer was rejected");
    const classified = await classifyPaths(context, changed);
    const bad = classified.filter((r) => r.verdict === "FORWARD-DIVERGENT");
    const firstDifference = (p: number) => {
      const at = changed.get(p)!.findIndex((id, j) => id !== eager.get(p)![j]);
      return `traced ids differ from eager at token ${at} (eager ${eager.get(p)![at]}, traced ${changed.get(p)![at]})`;
    };
    await emit({
      kind: "cells",
      cells: [...compared.map((p) => {
        const result = classified.find((r) => r.prompt === p);
        return cell(context, "capture_parity", gate, {
          prompt: p, status: result !== undefined && bad.includes(result) ? "fail" : "pass",
          gap_mnats: result?.maxGapMnats ?? 0, prompt_class: result === undefined ? "IDENTICAL" : result.verdict,
          detail: result === undefined ? "traced ids equal eager ids" : `${firstDifference(p)}; the traced path is ${result.verdict} against the oracle (max gap ${result.maxGapMnats} mnats)`,
        });
      }), ...brokenCells(context, "capture_parity", gate, "traced greedy", broken)],
    });
    const worst = bad[0] ?? classified[0];
    return {
      status: bad.length === 0 && broken.length === 0 ? "pass" : "fail",
      summary: `${arm.label} capture parity (traced vs eager): ${compared.length - changed.size}/${context.prompts.length} identical, ${changed.size - bad.length} near-tie, ${bad.length} forward-divergent` +
        (broken.length === 0 ? "" : `, ${broken.length} answers rejected`) +
        (worst === undefined ? "" : `; prompt ${worst.prompt}: ${firstDifference(worst.prompt)}, ${worst.verdict} (max gap ${worst.maxGapMnats} mnats)`) +
        (bad.length === 0 ? "" : " — the replayed graph computes something else than the eager one: an input baked into the capture as a constant (a position, a cache length) or a buffer the replay does not rewrite"),
      metrics: { prompts: context.prompts.length, identical: compared.length - changed.size, near_tie: changed.size - bad.length, forward_divergent: bad.length, rejected: broken.length },
    };
  });

  await check("capture_stable", suite.checks.capture_stable, ["tracedGreedy", "traceDemand"], async (gate): Promise<CheckOutcome> => {
    // Each traced greedy batch captures the decode graph anew: the demand each capture reports must be the same.
    const capture = async () => {
      await askGreedy(sut, "tracedGreedy", context.prompts.map((p) => ({ promptIds: goldens.promptIds[p], maxTokens: T })), context.vocabSize);
      return new Map((await sut.traceDemand!()).map((c) => [c.capture, c.demandBytes] as const));
    };
    const [first, second] = [await capture(), await capture()];
    if (first.size === 0 && second.size === 0) {
      const reason = `${sut.label} reported no captured graph after a traced pass: no demand to compare`;
      await emit({ kind: "cells", cells: [cell(context, "capture_stable", gate, { status: "skip", detail: reason })] });
      return { status: "skip", reason };
    }
    const names = [...new Set([...first.keys(), ...second.keys()])];
    const shown = (bytes: number | undefined) => (bytes === undefined ? "no capture" : `${bytes} B`);
    const unstable = names.filter((name) => first.get(name) !== second.get(name));
    await emit({
      kind: "cells",
      cells: names.map((name) => cell(context, "capture_stable", gate, {
        status: unstable.includes(name) ? "fail" : "pass",
        detail: `capture ${name}: ${shown(first.get(name))}, then ${shown(second.get(name))}`,
      })),
    });
    return {
      status: unstable.length === 0 ? "pass" : "fail",
      summary: `${arm.label} capture stability: ${names.length - unstable.length}/${names.length} captured graphs report the same demand twice` +
        unstable.map((name) => `; ${name}: ${shown(first.get(name))} then ${shown(second.get(name))}`).join("") +
        (unstable.length === 0 ? "" : " — a capture that depends on what ran before it (buffers kept from an earlier capture, a size read from the first request)"),
      metrics: { captures: names.length, unstable: unstable.length, demand_bytes_max: Math.max(...[...first.values(), ...second.values()]) },
    };
  });

  return { summaryLine };
}
