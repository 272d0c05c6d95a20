import type { CorpusGoldens } from "./corpus-goldens.js";

/**
 * What re-making one directory of corpus goldens (a perplexity suite's base log-probs) changed:
 * the chunk ids (a tokenizer change), the base's top-1 token and its log-prob of each next token
 * at every scored position, and the base's perplexity over the corpus.
 */
export interface CorpusGoldensDiff {
  readonly directory: string;
  readonly chunksChanged: number;
  readonly chunkCount: number;
  readonly top1Changed: number;
  readonly positionCount: number;
  /** Largest |Δ| of the base's log-prob of the next token, in nats, over positions whose chunk ids did not change. */
  readonly maxNextLogprobDelta: number;
  readonly perplexityBefore: number;
  readonly perplexityAfter: number;
}

/** exp of the mean negative log-prob of each next token: the base's perplexity over the scored positions. */
function perplexity(goldens: CorpusGoldens): number {
  const next = goldens.base.flat().map((position) => position.nextLogprob);
  return Math.exp(-next.reduce((sum, value) => sum + value, 0) / next.length);
}

export function corpusGoldensDiff(before: CorpusGoldens, after: CorpusGoldens): CorpusGoldensDiff {
  let chunksChanged = 0;
  let top1Changed = 0;
  let positionCount = 0;
  let maxNextLogprobDelta = 0;
  after.chunks.forEach((chunk, c) => {
    const old = before.chunks[c];
    const same = old !== undefined && [...old.promptIds, ...old.continuationIds].join(",") === [...chunk.promptIds, ...chunk.continuationIds].join(",");
    if (!same) chunksChanged++;
    after.base[c].forEach((position, j) => {
      positionCount++;
      const previous = before.base[c]?.[j];
      if (previous === undefined || previous.topK.ids[0] !== position.topK.ids[0]) top1Changed++;
      // Another token's log-prob is no measure of drift: only positions of unchanged chunks are compared.
      if (same && previous !== undefined) maxNextLogprobDelta = Math.max(maxNextLogprobDelta, Math.abs(position.nextLogprob - previous.nextLogprob));
    });
  });
  return {
    directory: after.directory, chunksChanged, chunkCount: after.chunks.length, top1Changed, positionCount, maxNextLogprobDelta,
    perplexityBefore: perplexity(before), perplexityAfter: perplexity(after),
  };
}

/** One line per directory, e.g. `goldens/x/perplexity: chunk ids 0/16 changed; top-1 0/1008 positions changed; next-token log-prob max |Δ| 2.1e-6 nats; base perplexity 312.41337 → 312.41340`. */
export function renderCorpusGoldensDiff(diff: CorpusGoldensDiff): string {
  return `${diff.directory}: chunk ids ${diff.chunksChanged}/${diff.chunkCount} changed; top-1 ${diff.top1Changed}/${diff.positionCount} positions changed; `
    + `next-token log-prob max |Δ| ${diff.maxNextLogprobDelta.toExponential(1)} nats; base perplexity ${diff.perplexityBefore.toPrecision(8)} → ${diff.perplexityAfter.toPrecision(8)}`;
}
