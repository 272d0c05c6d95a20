import { decodeValues, type Dtype, type KernelTensor, type OutputDtype } from "./tensor.js";

/**
 * One kernel op of the registry (docs/kernel-ops.md): its parameter schema, a seeded case
 * generator, a float64 reference with an error bound per output element (docs/kernel-bounds.md),
 * its byte and flop counts, and where its C reference kernel lives. Adding an op is one file
 * under kernels/ops/ and one line in kernels/ops/registry.ts, plus its C kernel, its rows in the
 * two docs pages and its cases in kernels/owned-kernels.json (test/ops-complete.test.ts names
 * what is missing); the plugin ABI and the runner protocol carry it unchanged.
 */
export type ParamValue = number | string | boolean;
export type OpParams = Readonly<Record<string, ParamValue>>;
export type OpAttrs = Readonly<Record<string, ParamValue>>;

/** `<IN>:<OUT>`: the dtype of the op's principal input and of its principal output. */
export interface Encoding {
  readonly input: Dtype;
  readonly output: OutputDtype;
}

export function parseEncoding(text: string): Encoding {
  const [input, output] = text.split(":");
  return { input: input as Dtype, output: output as OutputDtype };
}

/** What one case hands the kernel: inputs, sentinel-filled outputs, attributes. */
export interface KernelProblem {
  readonly op: string;
  readonly encoding: string;
  readonly inputs: readonly KernelTensor[];
  readonly outputs: readonly KernelTensor[];
  readonly attrs: OpAttrs;
}

/**
 * The reference answer for one output: bit-exact bytes, or float64 values with a per-element
 * bound (the envelope) that the stored output may not leave.
 */
export type ExpectedOutput =
  | { readonly kind: "exact"; readonly data: Uint8Array }
  | { readonly kind: "bounded"; readonly value: Float64Array; readonly bound: Float64Array };

/** The declared unit roundoffs a bound is derived with (f32 accumulation unless a plugin declares otherwise). */
export interface Precision {
  /** Unit roundoff of the arithmetic (float32: 2⁻²⁴). */
  readonly u: number;
}

export interface OpCounts {
  /** Bytes the op must move at least: every input and output once, as stored. */
  readonly bytes: number;
  readonly flops: number;
}

/** One edge of an axis: a label saying what it is, and the parameters (over the op's base case) that put a case on it. */
export interface Edge {
  readonly label: string;
  readonly params: OpParams;
}

/**
 * An op's edges for one encoding (docs/kernel-ops.md, "Edges"): a small base case, and per size
 * axis or attribute the values kernels most often get wrong (one block, below/at/above a tile,
 * tiny and large rows, grouped and ungrouped heads, extreme attributes). The generated part of a
 * kernel suite covers every edge of every axis at least once per encoding.
 */
export interface OpEdges {
  readonly base: OpParams;
  readonly axes: Readonly<Record<string, readonly Edge[]>>;
}

export const edge = (label: string, params: OpParams): Edge => ({ label, params });

/** `valueEdges("N", [1, 17])`: one axis whose edges set a single parameter, labelled by its value. */
export function valueEdges(param: string, values: readonly ParamValue[]): Edge[] {
  return values.map((value) => edge(`${param}=${String(value)}`, { [param]: value }));
}

export interface KernelOp<Name extends string = string> {
  /** The op's name: a kernel suite's `op`, and the `check` column of its cells (results' CheckName derives from the registry's names). */
  readonly name: Name;
  /** Encodings the registry can generate and check. */
  readonly encodings: readonly string[];
  /** JSON Schema properties of the op's parameters (besides op, encoding and seed); all are required. */
  readonly params: Readonly<Record<string, object>>;
  /** Parameters that are optional (with the default the generator uses). */
  readonly optional?: Readonly<Record<string, ParamValue>>;
  /** Checks that the schema cannot express (divisibility, ranges relative to each other); a message, or undefined. */
  readonly check?: (params: OpParams, encoding: Encoding) => string | undefined;
  /** The bound's name in docs/kernel-bounds.md, shown in every line. */
  readonly bound: string;
  /** The base case and edges the suite generator covers for `encoding`. */
  edges(encoding: Encoding): OpEdges;
  /** The file of native/reference-plugin/ that holds its C reference kernel, `op_<name>` (registered in plugin.c for every encoding). */
  readonly native: string;
  build(params: OpParams, encoding: Encoding, seed: number): KernelProblem;
  reference(problem: KernelProblem, precision: Precision): readonly ExpectedOutput[];
  counts(problem: KernelProblem): OpCounts;
}

/** Bytes of every input and output of a problem, as stored: the least traffic any kernel has. */
export function movedBytes(problem: KernelProblem): number {
  return [...problem.inputs, ...problem.outputs].reduce((sum, t) => sum + t.data.byteLength, 0);
}

export function inputTensor(problem: KernelProblem, name: string): KernelTensor {
  const tensor = problem.inputs.find((t) => t.name === name);
  if (tensor === undefined) throw new Error(`${problem.op}: no input named ${name}`);
  return tensor;
}

/** An input's values as float32, decoded exactly from its stored dtype. */
export function inputValues(problem: KernelProblem, name: string): Float32Array {
  const tensor = inputTensor(problem, name);
  return decodeValues(tensor.dtype, tensor.data);
}

export function inputIds(problem: KernelProblem, name: string): Int32Array {
  return new Int32Array(inputTensor(problem, name).data.slice().buffer);
}

/**
 * First-order bounds drop terms of order k·u² relative; for the sizes the suites use (k < 2¹⁰)
 * they are below 2⁻³⁸ relative, so a factor 1 + 2⁻¹⁶ on every first-order bound covers them.
 */
export const SECOND_ORDER = 1 + 2 ** -16;
