import { test } from "uvu";
import * as assert from "uvu/assert";
import { cpSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { GOLDEN_LOGPROB_TOLERANCE_NATS } from "../harness/goldens/logprob-tolerance.js";
import { GOLDENS_DIR } from "../harness/paths.js";
import { CORPUS_MANIFEST_FILE, readCorpusGoldens, remakeCorpusGoldens, type CorpusGoldens } from "../harness/perplexity/corpus-goldens.js";
import { corpusGoldensDiff, renderCorpusGoldensDiff } from "../harness/perplexity/corpus-goldens-diff.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

// `bench goldens make --all` re-makes a perplexity suite's corpus goldens too: the re-make on a copy
// of the committed directory, and what the diff line says when something moved.

const work = temporaryDirectory("corpus-remake");
test.after(() => work.remove());
const committed = join(GOLDENS_DIR, "tiny-random.F32", "perplexity");

test("corpusGoldensDiff counts changed chunks, top-1 flips and the largest next-token log-prob move; perplexity before and after", () => {
  const before = readCorpusGoldens(committed);
  // A changed chunk (another tokenization) and, elsewhere, a base that moved by 0.5 nats at one position with another top-1.
  const base = before.base.map((chunk, c) => chunk.map((position, j) => (c === 1 && j === 0
    ? { topK: { ids: [position.topK.ids[1], position.topK.ids[0], ...position.topK.ids.slice(2)], logprobs: position.topK.logprobs }, nextLogprob: position.nextLogprob - 0.5 }
    : position)));
  const chunks = before.chunks.map((chunk, c) => (c === 0 ? { ...chunk, promptIds: [chunk.promptIds[0] + 1, ...chunk.promptIds.slice(1)] } : chunk));
  const after: CorpusGoldens = { ...before, directory: "goldens/x/perplexity", base, chunks };
  const diff = corpusGoldensDiff(before, after);
  const positions = before.base.flat().length;
  assert.equal([diff.chunksChanged, diff.chunkCount, diff.top1Changed, diff.positionCount], [1, before.chunks.length, 1, positions]);
  assert.ok(Math.abs(diff.maxNextLogprobDelta - 0.5) < 1e-6, String(diff.maxNextLogprobDelta));
  assert.ok(Math.abs(Math.log(diff.perplexityAfter / diff.perplexityBefore) - 0.5 / positions) < 1e-9, "perplexity moves by exp(0.5 / positions)");
  assert.match(renderCorpusGoldensDiff(diff), new RegExp(`^goldens/x/perplexity: chunk ids 1/${before.chunks.length} changed; top-1 1/${positions} positions changed; next-token log-prob max \\|Δ\\| 5\\.0e-1 nats; base perplexity [\\d.e+]+ → [\\d.e+]+$`));
});

test("a copy of the committed corpus goldens re-made in place from its manifest: the same chunk ids and top-1 tokens, log-probs within the goldens' tolerance", async () => {
  const copy = join(work.path, "perplexity");
  cpSync(committed, copy, { recursive: true });
  const diff = await remakeCorpusGoldens(copy);
  assert.equal([diff.chunksChanged, diff.top1Changed], [0, 0]);
  assert.ok(diff.maxNextLogprobDelta <= GOLDEN_LOGPROB_TOLERANCE_NATS, String(diff.maxNextLogprobDelta));
  const manifest = (path: string) => JSON.parse(readFileSync(join(path, CORPUS_MANIFEST_FILE), "utf8")) as { created: string; model: object; corpus: object };
  assert.equal([manifest(copy).model, manifest(copy).corpus], [manifest(committed).model, manifest(committed).corpus]);
  assert.is.not(manifest(copy).created, manifest(committed).created, "written anew");
});

test("bench goldens make --help says --all re-makes corpus goldens too", () => {
  const help = bench(["goldens", "make", "--help"]);
  assert.is(help.status, 0, help.stderr);
  assert.match(help.stdout.replace(/\s+/g, " "), /a perplexity suite's corpus goldens included/);
});

test.run();
