import type { ModelRef } from "../fixtures/registry.js";
import { embeddedProvenance, LlamaCppSut, ORACLE_SETTINGS } from "../sut/llamacpp.js";
import type { SutProvenance, SystemUnderTest, TeacherForcedRequest, TopK } from "../sut/types.js";

/**
 * An oracle is a system whose outputs are taken as the reference. The llama.cpp oracle is the
 * embedded SUT opened with the deterministic recipe (flash attention off, F32 KV cache, one
 * explicit thread), which is recorded in every goldens manifest.
 */
export function openLlamaCppOracle(model: ModelRef): Promise<LlamaCppSut> {
  return LlamaCppSut.open(model.path, ORACLE_SETTINGS, `oracle llama.cpp ${model.id}`);
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

  private constructor(readonly label: string, readonly provenance: SutProvenance, private readonly model: ModelRef) {}

  static async open(model: ModelRef): Promise<OnDemandOracle> {
    return new OnDemandOracle(`oracle llama.cpp ${model.id}`, await embeddedProvenance(model.path, { ...ORACLE_SETTINGS }), model);
  }

  async teacherForcedTopK(requests: readonly TeacherForcedRequest[]): Promise<TopK[][]> {
    this.opened ??= openLlamaCppOracle(this.model);
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
