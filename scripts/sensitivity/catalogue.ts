/**
 * The sensitivity catalogue: each fault family, its sizes in increasing order, and the `bench run`
 * that puts one size in front of the gates. Every fault is FAKE: planted on purpose behind identity
 * (the reference runner's sized faults, behind-identity.ts, and its capture faults, trace-faults.ts; an arm setting; our own server's FAULT
 * switch; a FAKE kernel plugin) or in a scratch copy of a fixture, which identity fails on its own.
 */
import { SERVER_FAULT_ENV, SERVER_FAULTS } from "../../server/faults.js";
import { buildFakePlugin } from "../../test/helpers/fake-plugin.js";
import { TINY_RANDOM_SHAPE } from "../../harness/fixtures/tiny-random.js";
import {
  dropNormWeights, rmsEpsilon, ropeBase, scaleTensor, swapTokenRows, weightNoise, writeFaultedTinyRandom, zeroHead, type ModelFault,
} from "./faulted-models.js";
import { buildCharVocab, printableAscii } from "../../harness/fixtures/char-vocab.js";
import { behindIdentityCatalogue } from "./behind-identity.js";
import { traceFaultCatalogue } from "./trace-faults.js";

/** One `bench run` (arguments after `run`, plus environment) that shows the gates one fault size. */
export interface TrialRun {
  readonly args: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
}

export interface FaultSize {
  readonly label: string;
  readonly prepare: (scratch: string, promptArgs: readonly string[]) => Promise<TrialRun>;
}

export interface FaultFamily {
  readonly name: string;
  readonly what: string;
  /**
   * Graded: sizes increase, the first one caught is the threshold and larger ones are not run
   * (unless --all-sizes). Otherwise the sizes are distinct variants, and every one is run.
   */
  readonly graded: boolean;
  /** Run by a SUT that loads the goldens' own file: identity must PASS, or the run says nothing. */
  readonly behindIdentity?: boolean;
  /** The same run without the fault: it must pass (exit 0), or no size of this family measured anything. */
  readonly control?: FaultSize;
  readonly sizes: readonly FaultSize[];
}

/** The planted sampler faults (server/faults.ts): each the sampler wrong in one way the sampling suite must catch. */
const SAMPLER_FAULTS = SERVER_FAULTS.filter((fault) => fault.startsWith("sample-"));

const LAYERS = Array.from({ length: TINY_RANDOM_SHAPE.blockCount }, (_, layer) => layer);

/** A faulted tiny-random file run as the one required arm of parity16 (embedded llama.cpp) against the clean goldens. */
function modelSize(label: string, fault: ModelFault): FaultSize {
  return {
    label,
    prepare: async (scratch, promptArgs) => ({ args: ["--suite", "parity16", "--model", await writeFaultedTinyRandom(fault, scratch), ...promptArgs] }),
  };
}

const percent = (x: number): string => `${+(x * 100).toPrecision(3)}%`;

function noiseFamily(tensorClass: string, names: readonly string[], sizes: readonly number[]): FaultFamily {
  return {
    name: `noise ${tensorClass}`,
    what: `Gaussian noise of the given size × the tensor's RMS on ${names.join(", ")}`,
    graded: true,
    sizes: sizes.map((size) => modelSize(percent(size), { name: `noise-${tensorClass}-${size}`, tensors: weightNoise(names, size) })),
  };
}

const everyLayer = (suffix: string): string[] => LAYERS.map((layer) => `blk.${layer}.${suffix}.weight`);

export function catalogue(noiseSizes: readonly number[]): FaultFamily[] {
  const vocab = buildCharVocab(printableAscii());
  const id = (character: string): number => vocab.tokens.indexOf(character);
  const ropeOffsets = [0.001, 0.01, 0.05, 0.1];
  const base = TINY_RANDOM_SHAPE.ropeFreqBase;
  return [
    ...behindIdentityCatalogue(),
    ...traceFaultCatalogue(),
    ...["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"].map((c) => noiseFamily(c, everyLayer(c), noiseSizes)),
    noiseFamily("output", ["output.weight"], noiseSizes),
    noiseFamily("token_embd", ["token_embd.weight"], noiseSizes),
    {
      name: "RoPE base",
      graded: true,
      what: `rope.freq_base ${base} raised by the given fraction (GGUF metadata)`,
      sizes: ropeOffsets.map((x) => modelSize(`+${percent(x)} (${+(base * (1 + x)).toPrecision(6)})`, { name: `rope-${x}`, hyperparameters: ropeBase(base * (1 + x)) })),
    },
    {
      name: "norm epsilon",
      graded: true,
      what: `attention.layer_norm_rms_epsilon ${TINY_RANDOM_SHAPE.rmsEpsilon} replaced (GGUF metadata)`,
      sizes: [1e-4, 1e-3, 1e-2, 1e-1].map((eps) => modelSize(String(eps), { name: `eps-${eps}`, hyperparameters: rmsEpsilon(eps) })),
    },
    {
      name: "output head scaled",
      graded: true,
      what: "output.weight × factor (logits scaled: a temperature the greedy ids do not see)",
      sizes: [1.01, 1.05, 1.5, 0.5].map((factor) => modelSize(`×${factor}`, { name: `head-${factor}`, tensors: scaleTensor("output.weight", factor) })),
    },
    {
      name: "norm weights dropped",
      graded: false,
      what: "every *_norm.weight read as 1 (a forward that ignores norm weights)",
      sizes: [modelSize("all norms", { name: "norms-dropped", tensors: dropNormWeights })],
    },
    {
      name: "attention head zeroed",
      graded: false,
      what: "one head's slice of attn_output zeroed (its contribution lost)",
      sizes: [modelSize("layer 1 head 3", { name: "head-1-3", tensors: zeroHead(1, 3) }), modelSize("layer 0 head 0", { name: "head-0-0", tensors: zeroHead(0, 0) })],
    },
    {
      name: "token rows swapped",
      graded: false,
      what: "two rows of token_embd exchanged (a gather reading the wrong row for two ids)",
      sizes: [
        modelSize("'q' ↔ 'z'", { name: "rows-q-z", tensors: swapTokenRows("token_embd.weight", id("q"), id("z")) }),
        modelSize("'e' ↔ 't'", { name: "rows-e-t", tensors: swapTokenRows("token_embd.weight", id("e"), id("t")) }),
      ],
    },
    {
      name: "KV cache F16",
      graded: false,
      what: "the F32 model with an F16 KV cache (arm setting; F16 is the only reduced KV type the arms offer)",
      sizes: [{ label: "F16", prepare: async (_scratch, promptArgs) => ({ args: ["--suite", "parity16", "--model", "tiny-random:F32", "--kv-cache-type", "F16", ...promptArgs] }) }],
    },
    {
      name: "slot-poisoning server",
      graded: false,
      what: `our server with ${SERVER_FAULT_ENV}=skip-slot-clear (a slot keeps the previous request's state)`,
      sizes: [
        { label: "llama (parity16 server F32)", prepare: async (_scratch, promptArgs) => ({ args: ["--suite", "parity16", "--arm", "server F32", ...promptArgs], env: { [SERVER_FAULT_ENV]: "skip-slot-clear" } }) },
        { label: "qwen35 (zoo qwen35 server F32)", prepare: async (_scratch, promptArgs) => ({ args: ["--suite", "zoo", "--arm", "qwen35 server F32", ...promptArgs], env: { [SERVER_FAULT_ENV]: "skip-slot-clear" } }) },
      ],
    },
    {
      name: "sampler server",
      graded: false,
      what: `our server with ${SERVER_FAULT_ENV} set to a planted sampler fault (sampling suite, the whole-answer arm of our server)`,
      control: { label: "clean", prepare: async () => ({ args: ["--suite", "sampling", "--arm", "bench serve"] }) },
      sizes: SAMPLER_FAULTS.map((fault) => ({ label: fault, prepare: async () => ({ args: ["--suite", "sampling", "--arm", "bench serve"], env: { [SERVER_FAULT_ENV]: fault } }) })),
    },
    {
      name: "fp16-accumulating kernel",
      graded: false,
      what: "FAKE plugin HALF_ACCUM: the Q8_0 matvec sums each block in fp16 (quant-kernels suite, the Q8_0 matvec case)",
      sizes: [{ label: "Q8_0 matvec", prepare: async (scratch) => ({ args: ["--suite", "quant-kernels", "--plugin", buildFakePlugin(scratch, "HALF_ACCUM"), "--case", "5"] }) }],
    },
  ];
}
