import type { ModelRef } from "../fixtures/registry.js";
import { embeddedProvenance, LlamaCppSut, ORACLE_SETTINGS, type LlamaCppSettings } from "../sut/llamacpp.js";
import type { SutProvenance, SystemUnderTest, TeacherForcedRequest, TopK } from "../sut/types.js";

/**
 * An oracle is a system whose outputs are taken as the reference. The llama.cpp oracle is the
 * embedded SUT opened with the deterministic recipe (flash attention off, F32 KV cache, one
 * explicit thread), which is recorded in every goldens manifest. `contextTokens` is the most tokens
 * one request holds (prompt and continuation): the recipe's context grows to hold it.
 */
export function openLlamaCppOracle(model: ModelRef, contextTokens = 0): Promise<LlamaCppSut> {
  return LlamaCppSut.open(model.path, oracleSettings(contextTokens), `oracle llama.cpp ${model.id}`);
}

/**
 * The recipe for requests of up to `contextTokens` tokens: 1,024 cells, or the next multiple of 64
 * that holds them. The cells past a sequence are masked out, so the size moves no log-prob; it is
 * recorded, and checked against the goldens' own longest request.
 */
export function oracleSettings(contextTokens: number): LlamaCppSettings {
  return { ...ORACLE_SETTINGS, contextSize: Math.max(ORACLE_SETTINGS.contextSize, Math.ceil((contextTokens + 1) / 64) * 64) };
}

export const ORACLE_NAME = "llama.cpp";

/**
 * The oracle a run teacher-forces only where a SUT's path left the goldens' (a gap to measure):
 * loaded on the first such request, never when every path matches — an arm on the goldens' own
 * file never needs it, and loading a model with a 152k vocabulary and its context took seconds.
 * Its provenance is the opened oracle's, known without loading it, so cached rows keep their keys.
 */
export class OnDemandOracle implements SystemUnderTest {
  private opened: Promise<LlamaCppSut> | undefined;

  private constructor(readonly label: string, readonly provenance: SutProvenance, private readonly model: ModelRef, private readonly contextTokens: number) {}

  static async open(model: ModelRef, contextTokens = 0): Promise<OnDemandOracle> {
    return new OnDemandOracle(`oracle llama.cpp ${model.id}`, await embeddedProvenance(model.path, { ...oracleSettings(contextTokens) }), model, contextTokens);
  }

  async teacherForcedTopK(requests: readonly TeacherForcedRequest[]): Promise<TopK[][]> {
    this.opened ??= openLlamaCppOracle(this.model, this.contextTokens);
    return (await this.opened).teacherForcedTopK(requests);
  }

  /** Whether a request ever needed the model (tests and benchmarks read it). */
  get loaded(): boolean {
    return this.opened !== undefined;
  }

  async close(): Promise<void> {
    if (this.opened !== undefined) await (await this.opened).close();
  }
}
