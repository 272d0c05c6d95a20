import { BenchError } from "../errors.js";
import { GgmlType } from "../gguf/types.js";
import type { QuantCodec } from "./codec.js";
import { q4_K } from "./q4_k.js";
import { q5_K } from "./q5_k.js";
import { q6_K } from "./q6_k.js";
import { q8_0 } from "./q8_0.js";

const f32Codec: QuantCodec = {
  name: "F32",
  blockElements: 1,
  blockBytes: 4,
  encode: (values) => new Uint8Array(Float32Array.from(values).buffer),
  decode: (blocks, out) => {
    const copy = new Float32Array(blocks.slice().buffer);
    if (out === undefined) return copy;
    out.set(copy);
    return out;
  },
};

const CODECS: ReadonlyMap<GgmlType, QuantCodec> = new Map([
  [GgmlType.F32, f32Codec],
  [GgmlType.Q8_0, q8_0],
  [GgmlType.Q4_K, q4_K],
  [GgmlType.Q5_K, q5_K],
  [GgmlType.Q6_K, q6_K],
]);

/** Encodings a fixture variant may use, by the name users type. */
export const QUANT_NAMES = ["F32", "Q8_0", "Q4_K", "Q5_K", "Q6_K"] as const;
export type QuantName = (typeof QUANT_NAMES)[number];

export function codecFor(type: GgmlType): QuantCodec {
  const codec = CODECS.get(type);
  if (codec === undefined) throw new BenchError(`no codec for tensor type ${GgmlType[type] ?? type}`, { fix: `use one of ${QUANT_NAMES.join(", ")}` });
  return codec;
}

export function ggmlTypeByName(name: string, where: { file?: string; field?: string } = {}): GgmlType {
  if (!(QUANT_NAMES as readonly string[]).includes(name)) {
    throw new BenchError(`unknown quant type "${name}"`, { ...where, fix: `use one of ${QUANT_NAMES.join(", ")}` });
  }
  return GgmlType[name as QuantName];
}
