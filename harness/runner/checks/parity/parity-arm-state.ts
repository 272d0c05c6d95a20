import { teacherForcedAccuracy, type OracleRow, type TeacherForcedAccuracy } from "../../../accuracy/teacher-forced.js";
import { classifyPrompt, type PromptParity } from "../../../parity/classify.js";
import type { Goldens } from "../../../goldens/goldens.js";
import type { TeacherForcedCache } from "../../../oracle/teacher-forced-cache.js";
import type { CellRecord, CheckName } from "../../../results/types.js";
import type { GateLevel, ParitySuite, SuiteArm } from "../../../suites/parity-suite.js";
import type { TokenId, TopK } from "../../../sut/types.js";
import { askGreedy, askTeacherForced, type Checked } from "../../../sut/answer-shape.js";
import { ErrorsInCells, makeCell, runCheck, type ArmScope, type CheckOutcome } from "../../check.js";
import type { CheckModule } from "../check-module.js";

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

/** A check of a parity arm (one module under checks/parity/, listed in checks/registry.ts). */
export type ParityCheck<Name extends string = string> = CheckModule<Name, ParityArmState, "parity">;

/** A prompt whose answer had the wrong shape (failed with the reason) or never came (errored: its runner timed out), kept out of the scorers. */
export interface BrokenAnswer {
  readonly prompt: number;
  readonly reason: string;
  readonly errored?: boolean;
}

/** Splits checked answers into the prompts' valid values and the broken ones. */
export function sortAnswers<T>(prompts: readonly number[], answers: readonly Checked<T>[]): { valid: Map<number, T>; broken: BrokenAnswer[] } {
  const valid = new Map<number, T>();
  const broken: BrokenAnswer[] = [];
  answers.forEach((answer, i) => {
    if (answer.ok) valid.set(prompts[i], answer.value);
    else broken.push({ prompt: prompts[i], reason: answer.reason, errored: answer.errored === true });
  });
  return { valid, broken };
}

export function rejectedClause(broken: readonly BrokenAnswer[], prompts: number): string {
  return broken.length === 0 ? "" : `; ${broken.length}/${prompts} prompts' answers rejected (prompt ${broken[0].prompt}: ${broken[0].reason})`;
}

/** A SUT's teacher-forced answers to every selected prompt, scored against the goldens' top-k. */
export interface TeacherForcedScores {
  readonly scored: readonly number[];
  readonly rows: readonly (readonly TopK[])[];
  readonly oracle: readonly (readonly OracleRow[])[];
  readonly accuracy: TeacherForcedAccuracy;
  readonly broken: readonly BrokenAnswer[];
}

/** Why these goldens cannot score teacher forcing, if they cannot. */
export function goldensLackLogprobs(goldens: Goldens): string | undefined {
  if (goldens.topkIds !== undefined && goldens.topkLogprobs !== undefined) return undefined;
  const scope = idsOnly(goldens) ? ", so the check does not apply: the arm is gated on greedy parity alone" : "";
  return `the goldens hold no log-probs (K = ${goldens.manifest.K}, oracle ${goldens.manifest.oracle.name}): teacher-forced accuracy and KLD need the oracle's top-k${scope}`;
}

/**
 * Goldens that declare K = 0 (imported ids) define which checks apply: those that need the oracle's
 * log-probs are SKIPPED as informational, never passed and never required, so a run on them can
 * pass on greedy parity alone — and every summary says that this is all it checked. Goldens that
 * declare K > 0 but lack their log-probs stay required: their SKIP is a missing file.
 */
export function idsOnly(goldens: Goldens): boolean {
  return goldens.manifest.K === 0;
}

/** Appended to an arm's summary line when its goldens are ids only. */
export const IDS_ONLY_SCOPE = "ids-only goldens (K = 0): greedy parity alone, no log-prob checks";

/** A log-prob check's level on these goldens: informational where the goldens are ids only. */
export function logprobCheckLevel(goldens: Goldens, level: GateLevel | undefined): GateLevel | undefined {
  return level !== undefined && idsOnly(goldens) ? "informational" : level;
}

/**
 * What the checks of one parity arm share: the arm's context, and the answers asked once and
 * reused — the greedy pass alone (greedy_parity's, reused by determinism, batch invariance and
 * capture parity), the teacher-forced pass (scored by teacher_forced and distribution), and
 * classification against the oracle. Checks run in their registry order, so a check that reuses
 * an answer finds it when the check that asks it ran first.
 */
export class ParityArmState {
  readonly context: ParityArmContext;
  /** The greedy_parity check's valid answers alone, by prompt (undefined when it did not run). */
  aloneIds: Map<number, TokenId[]> | undefined;
  /** The arm's parity line, as greedy_parity wrote it. */
  summaryLine: string | undefined;
  /** The error cells the running check recorded (prompts whose runner timed out and was replaced): its verdict is an error, as it did not see every answer. */
  private erroredCells: CellRecord[] = [];
  private teacherForced: Promise<TeacherForcedScores> | undefined;

  constructor(armContext: ParityArmContext) {
    this.context = {
      ...armContext,
      emit: (event) => {
        if (event.kind === "cells") this.erroredCells.push(...event.cells.filter((c) => c.status === "error"));
        return armContext.emit(event);
      },
    };
  }

  /** Runs one check through runCheck: SKIPPED without its capabilities, an error verdict when it threw or recorded error cells. */
  async run<Name extends CheckName>(check: ParityCheck<Name>): Promise<void> {
    await runCheck(this.context, check.name, check.level(this), check.needs, async (gate) => {
      this.erroredCells = [];
      const outcome = await check.run(this, gate);
      if (this.erroredCells.length > 0) throw new ErrorsInCells(`${this.erroredCells.length} prompt(s) errored (prompt ${this.erroredCells[0].prompt}: ${this.erroredCells[0].detail}); see their cells`);
      return outcome;
    });
  }

  /** Records cells of the running check. */
  async record(cells: readonly CellRecord[]): Promise<void> {
    await this.context.emit({ kind: "cells", cells });
  }

  /** A SKIPPED verdict with its one cell: nothing on this data could fail the check. */
  async skip(check: CheckName, gate: GateLevel, reason: string): Promise<CheckOutcome> {
    await this.record([this.cell(check, gate, { status: "skip", detail: reason })]);
    return { status: "skip", reason };
  }

  cell(check: CheckName, gate: GateLevel, fields: Partial<CellRecord> & Pick<CellRecord, "status" | "detail">): CellRecord {
    return makeCell(this.context, check, gate, fields, fields.prompt === undefined || fields.prompt === null ? "" : ` --prompt ${fields.prompt}`);
  }

  brokenCells(check: CheckName, gate: GateLevel, method: string, broken: readonly BrokenAnswer[]): CellRecord[] {
    return broken.map(({ prompt, reason, errored }) => this.cell(check, gate, errored === true ? { prompt, status: "error", detail: reason } : { prompt, status: "fail", detail: `${method} answer rejected: ${reason}` }));
  }

  parityCells(check: CheckName, gate: GateLevel, results: readonly PromptParity[]): CellRecord[] {
    return results.flatMap((result) => result.cells.map((c) => this.cell(check, gate, {
      prompt: result.prompt, position: c.position, status: c.withinBand ? "pass" : "fail",
      expected_id: c.expectedId, observed_id: c.observedId, gap_mnats: c.gapMnats, gap_lower_bound: c.lowerBound, prompt_class: result.verdict,
      detail: c.expectedId === c.observedId ? "match" : `gap ${c.gapMnats}${c.lowerBound ? "+ (outside oracle top-k)" : ""} mnats`,
    })));
  }

  /** One greedy request per selected prompt, T tokens each. */
  greedyRequests(): { promptIds: readonly TokenId[]; maxTokens: number }[] {
    const { goldens } = this.context;
    return this.context.prompts.map((p) => ({ promptIds: goldens.promptIds[p], maxTokens: goldens.manifest.T }));
  }

  /** Classifies SUT paths against the goldens, teacher-forcing the oracle only where they differ. */
  async classifyPaths(paths: ReadonlyMap<number, readonly TokenId[]>): Promise<PromptParity[]> {
    const { goldens, suite } = this.context;
    const divergent = [...paths.entries()].filter(([p, ids]) => ids.join(",") !== goldens.greedyIds[p].join(","));
    const rows = await this.context.oracle.rows(divergent.map(([p, ids]) => ({ promptIds: goldens.promptIds[p], continuationIds: ids, k: Math.max(goldens.manifest.K, suite.top_k) })));
    const oracleRows = new Map(divergent.map(([p], i) => [p, rows[i]]));
    return [...paths.entries()].map(([p, ids]) => classifyPrompt(p, goldens.greedyIds[p], ids, suite.band_mnats, oracleRows.get(p)));
  }

  /** One teacher-forced pass serves both checks that score it: the distribution gate costs no SUT time. */
  scoreTeacherForcedOnce(): Promise<TeacherForcedScores> {
    return (this.teacherForced ??= this.scoreTeacherForced());
  }

  private async scoreTeacherForced(): Promise<TeacherForcedScores> {
    const { goldens, sut, prompts } = this.context;
    const answers = await askTeacherForced(sut, prompts.map((p) => ({ promptIds: goldens.promptIds[p], continuationIds: goldens.greedyIds[p], k: goldens.manifest.K })), this.context.vocabSize);
    const { valid, broken } = sortAnswers(prompts, answers);
    const scored = prompts.filter((p) => valid.has(p));
    const rows = scored.map((p) => valid.get(p)!);
    const oracle = scored.map((p) => goldens.topkIds![p].map((ids, t) => ({ ids, logprobs: goldens.topkLogprobs![p][t] })));
    return { scored, rows, oracle, accuracy: teacherForcedAccuracy(scored.map((p) => goldens.greedyIds[p]), oracle, rows), broken };
  }

  /**
   * Every prompt's greedy answer through `method` beside its answer alone (the greedy check's when
   * it ran): the prompts that could be compared, those whose ids changed, and the broken ones — a
   * prompt with no valid answer on either path cannot be compared and fails with the reason.
   */
  async againstAlone(method: "batchedGreedy" | "tracedGreedy", aloneRejected: string) {
    const { sut, prompts, vocabSize } = this.context;
    const requests = this.greedyRequests();
    const reference = this.aloneIds ?? sortAnswers(prompts, await askGreedy(sut, "greedy", requests, vocabSize)).valid;
    const { valid: other, broken } = sortAnswers(prompts, await askGreedy(sut, method, requests, vocabSize));
    for (const p of prompts) {
      if (!reference.has(p) && !broken.some((b) => b.prompt === p)) broken.push({ prompt: p, reason: aloneRejected });
    }
    const compared = prompts.filter((p) => !broken.some((b) => b.prompt === p));
    const changed = new Map(compared.map((p) => [p, other.get(p)!] as const).filter(([p, ids]) => ids.join(",") !== reference.get(p)!.join(",")));
    return { reference, compared, changed, broken };
  }
}
