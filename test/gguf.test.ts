// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gguf as hfGguf } from "@huggingface/gguf";
import { readGguf } from "../harness/gguf/read.js";
import { validateLlamaMetadata } from "../harness/gguf/llama-metadata.js";
import { GgmlType, GgufValueType } from "../harness/gguf/types.js";
import { encodeGguf, gguf } from "../harness/gguf/write.js";
import { ensureFixture } from "../harness/fixtures/registry.js";
import { buildTinyRandom } from "../harness/fixtures/tiny-random.js";
import { encodeFixtureGguf } from "../harness/fixtures/architecture.js";
import { QUANT_NAMES } from "../harness/quant/registry.js";
import { BenchError } from "../harness/errors.js";
import { temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("gguf");
test.after(() => work.remove());

function errorOf(fn: () => unknown): BenchError {
  try {
    fn();
  } catch (error) {
    if (error instanceof BenchError) return error;
    throw error;
  }
  throw new Error("expected a BenchError");
}

const everyType = [
  ["u8", { type: GgufValueType.UINT8, value: 200 }],
  ["i8", { type: GgufValueType.INT8, value: -100 }],
  ["u16", { type: GgufValueType.UINT16, value: 60000 }],
  ["i16", { type: GgufValueType.INT16, value: -30000 }],
  ["u32", { type: GgufValueType.UINT32, value: 4000000000 }],
  ["i32", { type: GgufValueType.INT32, value: -2000000000 }],
  ["f32", { type: GgufValueType.FLOAT32, value: 1.5 }],
  ["f64", { type: GgufValueType.FLOAT64, value: Math.PI }],
  ["u64", { type: GgufValueType.UINT64, value: 2n ** 60n }],
  ["i64", { type: GgufValueType.INT64, value: -(2n ** 60n) }],
  ["bool", { type: GgufValueType.BOOL, value: true }],
  ["str", { type: GgufValueType.STRING, value: "héllo ▁ world" }],
  ["arr.str", gguf.array(GgufValueType.STRING, ["a", "bc", ""])],
  ["arr.i32", gguf.array(GgufValueType.INT32, [1, -2, 3])],
  ["arr.f32", gguf.array(GgufValueType.FLOAT32, [0.5, -0.25])],
  ["arr.bool", gguf.array(GgufValueType.BOOL, [true, false])],
] as const;

test("writer and reader agree on every metadata value type, arrays and alignment", () => {
  const path = join(work.path, "all-types.gguf");
  const tensor = { name: "t", dims: [3, 2], type: GgmlType.F32, data: new Uint8Array(Float32Array.from([1, 2, 3, 4, 5, 6]).buffer) };
  const odd = { name: "odd", dims: [5], type: GgmlType.F32, data: new Uint8Array(20) };
  writeFileSync(path, encodeGguf([["general.alignment", gguf.u32(64)], ...everyType], [odd, tensor]));
  const file = readGguf(path);
  assert.is(file.alignment, 64);
  assert.is(file.dataOffset % 64, 0);
  assert.is(file.tensors[1].offset % 64, 0);
  for (const [key, value] of everyType) assert.equal(file.metadata.get(key), value, key);
  assert.equal(file.tensors[1].dims, [3, 2]);
});

test("a header read again is parsed again unless its file is unchanged and settled: a rewrite of the same size is never served stale", async () => {
  const fixture = await ensureFixture("tiny-random", "F32");
  if (Date.now() - statSync(fixture).ctimeMs > 2000) assert.is(readGguf(fixture), readGguf(fixture), "an unchanged, settled file is parsed once");
  const path = join(work.path, "reread.gguf");
  const encode = (value: number) => encodeGguf([["general.alignment", gguf.u32(32)], ["x", gguf.u32(value)]], []);
  writeFileSync(path, encode(1));
  assert.is.not(readGguf(path), readGguf(path), "a file written just now is parsed on every read");
  // The same length of bytes and the old mtime put back: the inode's ctime still moves, so the new value is read.
  const mtime = statSync(path).mtime;
  writeFileSync(path, encode(2));
  utimesSync(path, mtime, mtime);
  assert.is(readGguf(path).metadata.get("x")?.value, 2);
});

test("@huggingface/gguf parses every fixture variant we write, with the same tensors and metadata", async () => {
  for (const quant of QUANT_NAMES) {
    const path = await ensureFixture("tiny-random", quant);
    const ours = readGguf(path);
    const theirs = await hfGguf(path, { allowLocalFile: true });
    assert.is(theirs.tensorInfos.length, ours.tensors.length, quant);
    theirs.tensorInfos.forEach((info, i) => {
      assert.is(info.name, ours.tensors[i].name);
      assert.equal(info.shape.map(Number), ours.tensors[i].dims);
      assert.is(info.dtype, ours.tensors[i].type);
      assert.is(Number(info.offset), ours.tensors[i].offset);
    });
    // Their metadata type is a union over every architecture; read it as a plain record.
    const metadata = theirs.metadata as unknown as Record<string, unknown>;
    assert.is(metadata["llama.embedding_length"], 256);
    assert.is(metadata["general.architecture"], "llama");
    assert.is((metadata["tokenizer.ggml.tokens"] as string[]).length, 3 + 256 + 95);
  }
});

test("corrupt files get one-line errors naming the file and the problem", async () => {
  const good = readFileSync(await ensureFixture("tiny-random", "Q8_0"));
  const write = (name: string, bytes: Uint8Array) => {
    const path = join(work.path, name);
    writeFileSync(path, bytes);
    return path;
  };
  const truncatedHeader = write("truncated-header.gguf", good.subarray(0, 200));
  assert.match(errorOf(() => readGguf(truncatedHeader)).oneLine(), /truncated-header\.gguf: file is truncated/);
  const truncatedData = write("truncated-data.gguf", good.subarray(0, good.length - 1000));
  const dataError = errorOf(() => readGguf(truncatedData));
  assert.match(dataError.oneLine(), /past the end of the file/);
  assert.ok(dataError.field !== undefined, "names the tensor");
  const badMagic = Uint8Array.from(good);
  badMagic[0] = 0x58;
  assert.match(errorOf(() => readGguf(write("magic.gguf", badMagic))).oneLine(), /bad magic .*not a GGUF file/);
  // Unknown tensor type: rewrite the first tensor's type id (we know our writer's layout).
  const file = readGguf(await ensureFixture("tiny-random", "Q8_0"));
  const name = file.tensors[0].name;
  const at = Buffer.from(good).indexOf(Buffer.from(name)) + name.length + 4 + 8 * file.tensors[0].dims.length;
  const unknownType = Uint8Array.from(good);
  new DataView(unknownType.buffer).setUint32(at, 99, true);
  const typeError = errorOf(() => readGguf(write("type.gguf", unknownType)));
  assert.match(typeError.oneLine(), /token_embd\.weight: unknown or unsupported tensor type id 99/);
  assert.match(typeError.oneLine(), /fix: use one of F32/);
  assert.match(errorOf(() => readGguf(join(work.path, "absent.gguf"))).oneLine(), /cannot open model file \(ENOENT\)/);
});

test("missing or zero llama keys that would abort llama.cpp are caught before it loads the file", () => {
  const model = buildTinyRandom();
  const base = encodeFixtureGguf(model, GgmlType.F32);
  const file = join(work.path, "base.gguf");
  writeFileSync(file, base);
  assert.is(validateLlamaMetadata(readGguf(file), file).feedForwardLength, 512);
  for (const [key, mode] of [["llama.feed_forward_length", "missing"], ["llama.attention.head_count", "missing"], ["llama.attention.head_count", "zero"]] as const) {
    const extra = mode === "zero" ? [[key, gguf.u32(0)] as [string, ReturnType<typeof gguf.u32>]] : [];
    const tensors = model.tensors.map((t) => ({ name: t.name, dims: t.dims, type: GgmlType.F32, data: new Uint8Array(t.values.buffer) }));
    const metadata = [...readGguf(file).metadata.entries()].filter(([k]) => k !== key).concat(extra);
    const path = join(work.path, `${mode}-${key}.gguf`);
    writeFileSync(path, encodeGguf(metadata, tensors));
    const error = errorOf(() => validateLlamaMetadata(readGguf(path), path));
    assert.is(error.field, key);
    assert.match(error.oneLine(), mode === "zero" ? /must be a positive number/ : /required key is missing \(llama\.cpp would abort the process\)/);
  }
});

test.run();
