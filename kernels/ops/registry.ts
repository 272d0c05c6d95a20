import { BenchError } from "../../harness/errors.js";
import { assertMatchesInlineSchema } from "../../harness/io/json-schema.js";
import { conv1dUpdate } from "./conv1d-update.js";
import { dequantize } from "./dequantize.js";
import { embeddingGather } from "./embedding-gather.js";
import { gdnDecode } from "./gdn-decode.js";
import { l2Norm } from "./l2-norm.js";
import { matmulBtQuantGrouped } from "./matmul-bt-quant-grouped.js";
import { matvec } from "./matvec.js";
import { moeTopk } from "./moe-topk.js";
import { parseEncoding, type KernelOp, type KernelProblem, type ParamValue } from "./op.js";
import { rmsNorm } from "./rms-norm.js";
import { rope } from "./rope.js";
import { sdpaDecode } from "./sdpa-decode.js";
import { siluMul } from "./silu-mul.js";
import { softmax } from "./softmax.js";
import { ssdDecode } from "./ssd-decode.js";

/** Every op the kernel suites know (docs/kernel-ops.md): adding an op is one file under kernels/ops/ and one entry here. */
const OPS = [dequantize, matvec, matmulBtQuantGrouped, embeddingGather, rmsNorm, l2Norm, siluMul, softmax, rope, sdpaDecode, gdnDecode, conv1dUpdate, ssdDecode, moeTopk] as const;

/** An op's name: one check of a kernel suite. */
export type KernelOpName = (typeof OPS)[number]["name"];

/** Every op the kernel suites know, by name. */
export const KERNEL_OPS: ReadonlyMap<string, KernelOp> = new Map(OPS.map((op) => [op.name, op]));

/**
 * One case of a kernel suite: the op, its encoding, its parameters and the seed its inputs are
 * drawn from. `type` is the older spelling of `<type>:F32` for dequantize and matvec.
 */
export interface KernelCaseSpec {
  readonly op: string;
  readonly encoding?: string;
  readonly type?: string;
  readonly seed: number;
  readonly [param: string]: ParamValue | undefined;
}

/** Ops whose cases may still name their weight type as `type` (kernel suites written before encodings). */
const LEGACY_TYPE_OPS = new Set(["dequantize", "matvec"]);

export function caseEncoding(spec: KernelCaseSpec): string {
  return spec.encoding ?? `${spec.type}:F32`;
}

export function kernelOp(name: string): KernelOp {
  const op = KERNEL_OPS.get(name);
  if (op === undefined) throw new Error(`no kernel op ${JSON.stringify(name)}`);
  return op;
}

function caseSchema(op: KernelOp): object {
  const legacy = LEGACY_TYPE_OPS.has(op.name);
  return {
    type: "object",
    additionalProperties: false,
    required: ["op", "seed", ...Object.keys(op.params)],
    ...(legacy ? { oneOf: [{ required: ["encoding"] }, { required: ["type"] }] } : { required: ["op", "encoding", "seed", ...Object.keys(op.params)] }),
    properties: {
      op: { const: op.name },
      encoding: { enum: [...op.encodings] },
      ...(legacy ? { type: { enum: op.encodings.map((e) => e.split(":")[0]) } } : {}),
      seed: { type: "integer", minimum: 0, maximum: 4294967295 },
      ...op.params,
      ...Object.fromEntries(Object.entries(op.optional ?? {}).map(([name, value]) => [name, { type: typeof value }])),
    },
  };
}

/** Checks one case of a suite against its op's schema and constraints: a one-line error naming `cases.N.field`. */
export function validateKernelCase(spec: unknown, file: string, index: number): KernelCaseSpec {
  const field = `cases.${index}`;
  const name = (spec as { op?: unknown } | null)?.op;
  const op = typeof name === "string" ? KERNEL_OPS.get(name) : undefined;
  if (op === undefined) throw new BenchError(`unknown kernel op ${JSON.stringify(name)}`, { file, field: `${field}.op`, fix: `use one of ${[...KERNEL_OPS.keys()].join(", ")}` });
  const valid = assertMatchesInlineSchema<KernelCaseSpec>(spec, `kernel-op:${op.name}`, () => caseSchema(op), file, field, `kernels/ops: ${op.name}`);
  const problem = op.check?.(valid as Readonly<Record<string, ParamValue>>, parseEncoding(caseEncoding(valid)));
  if (problem !== undefined) throw new BenchError(problem, { file, field, fix: "change the case's parameters" });
  return valid;
}

/** `MATMUL_BT_QUANT_GROUPED(encoding=Q4_K:BF16,E=8,…,seed=7)`: the case's fields as the suite writes them. */
export function caseName(spec: KernelCaseSpec): string {
  return `${spec.op.toUpperCase()}(${Object.entries(spec).filter(([key]) => key !== "op").map(([key, value]) => `${key}=${String(value)}`).join(",")})`;
}

/** Draws a case's inputs from its seed, with sentinel-filled outputs. */
export function buildCase(spec: KernelCaseSpec): KernelProblem {
  const op = kernelOp(spec.op);
  const params = Object.fromEntries(Object.entries(spec).filter(([, v]) => v !== undefined)) as Record<string, ParamValue>;
  return op.build(params, parseEncoding(caseEncoding(spec)), spec.seed);
}
