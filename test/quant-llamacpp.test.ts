import { test } from "uvu";
import * as assert from "uvu/assert";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildTinyRandom } from "../harness/fixtures/tiny-random.js";
import { dequantizedTwin } from "../harness/fixtures/dequantized-twin.js";
import { encodeFixtureGguf, type TensorTypePolicy } from "../harness/fixtures/architecture.js";
import { GgmlType } from "../harness/gguf/types.js";
import { QUANT_NAMES, ggmlTypeByName } from "../harness/quant/registry.js";
import { LlamaCppSut, ORACLE_SETTINGS } from "../harness/sut/llamacpp.js";
import { temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("quant-llamacpp");
test.after(() => work.remove());

const TEXTS = ["The quick brown fox jumps over the lazy dog.", "Hello, world! 1 2 3 {}[]~"];

async function fullDistributions(path: string): Promise<Map<number, number>[]> {
  const sut = await LlamaCppSut.open(path, ORACLE_SETTINGS);
  try {
    const ids = await sut.tokenize(TEXTS);
    const rows = await sut.teacherForcedTopK(ids.map((p) => ({ promptIds: p.slice(0, 2), continuationIds: p.slice(2), k: 354 })));
    return rows.flat().map((row) => new Map(row.ids.map((id, i) => [id, row.logprobs[i]])));
  } finally {
    await sut.close();
  }
}

function maxDifference(a: Map<number, number>[], b: Map<number, number>[]): number {
  let worst = 0;
  a.forEach((row, i) => row.forEach((value, id) => { worst = Math.max(worst, Math.abs(value - b[i].get(id)!)); }));
  return worst;
}

/**
 * llama.cpp dequantizes a quantized token embedding with ggml's own decoder (get_rows), with no
 * activation rounding in between. So a model whose embedding is stored in encoding Q must compute
 * exactly what the F32 model holding OUR decode of that embedding computes — any decoder bug shows.
 */
const embeddingOnly: TensorTypePolicy = (tensor, weightType) => (tensor.name === "token_embd.weight" ? weightType : GgmlType.F32);

test("through llama.cpp, each encoding gives the same outputs as the F32 model made from our dequantized weights", async () => {
  const model = buildTinyRandom();
  const originalPath = join(work.path, "original.gguf");
  writeFileSync(originalPath, encodeFixtureGguf(model, GgmlType.F32));
  const original = await fullDistributions(originalPath);
  for (const name of QUANT_NAMES.filter((q) => q !== "F32")) {
    const type = ggmlTypeByName(name);
    const quantPath = join(work.path, `${name}.gguf`);
    const twinPath = join(work.path, `${name}-twin.gguf`);
    writeFileSync(quantPath, encodeFixtureGguf(model, type, embeddingOnly));
    writeFileSync(twinPath, encodeFixtureGguf(dequantizedTwin(model, type, embeddingOnly), GgmlType.F32));
    const quantized = await fullDistributions(quantPath);
    const twin = await fullDistributions(twinPath);
    assert.ok(maxDifference(quantized, twin) <= 1e-6, `${name}: quantized vs our-dequantized twin differ by ${maxDifference(quantized, twin)}`);
    assert.ok(maxDifference(quantized, original) > 1e-3, `${name}: the check must be able to see quantization at all`);
  }
});

test.run();
