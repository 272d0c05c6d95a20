// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { createRequire } from "node:module";
import { f16ToF32, f32ToF16 } from "../harness/quant/fp16.js";
import { q8_0 } from "../harness/quant/q8_0.js";
import { q4_K } from "../harness/quant/q4_k.js";
import { q5_K } from "../harness/quant/q5_k.js";
import { q6_K } from "../harness/quant/q6_k.js";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { SeededRandom } from "../harness/fixtures/seeded-random.js";
import type { QuantCodec } from "../harness/quant/codec.js";

const codecs: QuantCodec[] = [q8_0, q4_K, q5_K, q6_K];

/** llama.cpp's own ggml base library, shipped inside node-llama-cpp's prebuilt package. */
function libggmlBase(): string {
  const entry = createRequire(import.meta.url).resolve("node-llama-cpp");
  return join(entry.slice(0, entry.indexOf("/node_modules/") + "/node_modules/".length), "@node-llama-cpp", `${process.platform}-${process.arch}`, "bins", `${process.platform}-${process.arch}`, "libggml-base.so");
}

function ggmlDecode(codec: QuantCodec, blocks: Uint8Array): Float32Array {
  const out = execFileSync("python3", [join(PACKAGE_ROOT, "scripts", "ggml-dequantize.py"), libggmlBase(), codec.name], { input: blocks, maxBuffer: 1 << 28 });
  return new Float32Array(out.buffer, out.byteOffset, out.byteLength / 4);
}

function sample(length: number, seed: number): Float32Array {
  const random = new SeededRandom(seed);
  const x = new Float32Array(length);
  for (let i = 0; i < length; i++) {
    // Mixed scales per block, a few outliers, exact zeros and a constant run: the cases scale codes get wrong.
    const block = Math.floor(i / 256);
    const scale = [1, 1e-3, 40, 0.02][block % 4];
    x[i] = i % 97 === 0 ? 0 : random.normal(scale) * (i % 251 === 0 ? 8 : 1);
  }
  x.fill(0.125, 256 * 5, 256 * 6);
  return x;
}

for (const codec of codecs) {
  test(`${codec.name}: our decoder is bit-exact with ggml's dequantize_row (libggml-base via ctypes)`, () => {
    const x = sample(256 * 64, 7);
    const blocks = codec.encode(x);
    assert.is(blocks.length, (x.length / codec.blockElements) * codec.blockBytes);
    const ours = codec.decode(blocks);
    const theirs = ggmlDecode(codec, blocks);
    const ourBits = new Uint32Array(ours.buffer);
    const theirBits = new Uint32Array(theirs.buffer, theirs.byteOffset, theirs.length);
    let differing = 0;
    for (let i = 0; i < ourBits.length; i++) if (ourBits[i] !== theirBits[i]) differing++;
    assert.is(differing, 0, `${differing} values differ in their bits`);
  });

  test(`${codec.name}: round-trip error stays inside the encoding's step`, () => {
    const x = sample(256 * 16, 11);
    const y = codec.decode(codec.encode(x));
    const levels = { Q8_0: 127, Q4_K: 15, Q5_K: 31, Q6_K: 31 }[codec.name]!;
    for (let b = 0; b < x.length / 256; b++) {
      let range = 0;
      let worst = 0;
      for (let i = b * 256; i < (b + 1) * 256; i++) {
        range = Math.max(range, Math.abs(x[i]));
        worst = Math.max(worst, Math.abs(x[i] - y[i]));
      }
      // One step of the coarsest sub-block (affine codecs span 2x the absolute range), plus scale-code rounding.
      assert.ok(worst <= (2.5 * range) / levels + 1e-6, `block ${b}: error ${worst} for range ${range}`);
    }
  });
}

test("fp16: round to nearest even, subnormals, overflow, and exact decode of every pattern we encode", () => {
  assert.is(f32ToF16(1), 0x3c00);
  assert.is(f32ToF16(-2), 0xc000);
  assert.is(f32ToF16(65504), 0x7bff);
  assert.is(f32ToF16(65520), 0x7c00, "rounds up to infinity");
  assert.is(f32ToF16(1 + 2 ** -11), 0x3c00, "a tie rounds to even");
  assert.is(f32ToF16(1 + 3 * 2 ** -11), 0x3c02, "a tie rounds to even (up)");
  assert.is(f32ToF16(2 ** -24), 0x0001, "smallest subnormal");
  assert.is(f32ToF16(2 ** -26), 0x0000, "underflows to zero");
  for (let bits = 0; bits < 0x7c00; bits += 7) assert.is(f32ToF16(f16ToF32(bits)), bits, `pattern ${bits}`);
});

test.run();
