/**
 * A runner whose tokenizer is a model's own Hugging Face tokenizer (tokenizer.json and
 * tokenizer_config.json, run by @lenml/tokenizers): what a bring-up team's Python runner does with
 * `transformers.AutoTokenizer`, spoken over the runner protocol (docs/runner-protocol.md). It answers
 * tokenize and detokenize only, with `tokenize_special`: a tokenizer suite's runner arm holds it id
 * for id to llama.cpp's tokenizer of the model's GGUF.
 *
 *   node dist/scripts/runners/hf-tokenizer-runner.js DIR [--fault NAME]
 *
 * DIR holds tokenizer.json and tokenizer_config.json (a Hugging Face model directory). `--fault`
 * plants a FAKE tokenizer bug for tests: `split-digits` encodes every digit as its own token,
 * `always-bos` adds the tokenizer's BOS even when asked not to.
 */
import { readFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { huggingFaceTokenizer, type ReferenceTokenizer } from "../../harness/tokenizer/reference-tokenizer.js";

const PROTOCOL = "bringup-bench-runner";
const VERSION = 1;
const FAULTS = ["split-digits", "always-bos"] as const;
type Fault = (typeof FAULTS)[number];

const send = (message: object) => process.stdout.write(`${JSON.stringify(message)}\n`);

/** The tokenizer directory and the planted fault from argv, or the reason they are wrong. */
function parseArguments(argv: readonly string[]): { directory: string; fault: Fault | undefined } | { error: string } {
  const [directory, flag, name, ...rest] = argv;
  if (directory === undefined || rest.length > 0 || (flag !== undefined && flag !== "--fault")) return { error: "usage: hf-tokenizer-runner.js DIR [--fault NAME] (DIR holds tokenizer.json and tokenizer_config.json)" };
  if (flag === undefined) return { directory, fault: undefined };
  if (!(FAULTS as readonly string[]).includes(name ?? "")) return { error: `--fault ${name ?? "(none)"}: use one of ${FAULTS.join(", ")}` };
  return { directory, fault: name as Fault };
}

/** Ids of one text as the protocol asks them; a planted fault bends them the way its name says. */
function encoder(tokenizer: ReferenceTokenizer, fault: Fault | undefined) {
  const bos = tokenizer.encode("", "parsed", true)[0];
  return (text: string, addSpecial: boolean, parseSpecial: boolean): number[] => {
    const mode = parseSpecial ? "parsed" : "plain";
    if (fault === "always-bos" && !addSpecial && bos !== undefined) return [bos, ...tokenizer.encode(text, mode)];
    if (fault !== "split-digits") return tokenizer.encode(text, mode, addSpecial);
    const pieces = text.split(/(\p{Nd})/u).filter((piece) => piece !== "");
    const ids = pieces.flatMap((piece) => tokenizer.encode(piece, mode));
    return addSpecial ? tokenizer.encode("", mode, true).concat(ids) : ids;
  };
}

function main(): void {
  const parsed = parseArguments(process.argv.slice(2));
  if ("error" in parsed) {
    send({ protocol: PROTOCOL, version: VERSION, error: parsed.error });
    return;
  }
  const directory = resolve(parsed.directory);
  let tokenizer: ReferenceTokenizer;
  try {
    const read = (file: string) => JSON.parse(readFileSync(join(directory, file), "utf8")) as unknown;
    tokenizer = huggingFaceTokenizer(basename(directory), { tokenizerJSON: read("tokenizer.json"), tokenizerConfig: read("tokenizer_config.json") });
  } catch (error) {
    send({ protocol: PROTOCOL, version: VERSION, error: `cannot load the tokenizer in ${directory}: ${(error as Error).message}` });
    return;
  }
  const encode = encoder(tokenizer, parsed.fault);
  send({
    protocol: PROTOCOL, version: VERSION, engine: `@lenml/tokenizers on ${join(directory, "tokenizer.json")}${parsed.fault === undefined ? "" : ` with FAKE fault ${parsed.fault}`}`,
    capabilities: ["tokenize", "detokenize", "tokenize_special"], settings: parsed.fault === undefined ? {} : { fault: parsed.fault },
  });
  // Protocol version 1's defaults: BOS added, special-token text plain, special tokens dropped when decoding.
  const methods: Record<string, (params: Record<string, unknown>) => object> = {
    tokenize: (params) => ({ ids: (params.texts as string[]).map((text) => encode(text, params.add_special !== false, params.parse_special === true)) }),
    detokenize: (params) => ({ texts: (params.sequences as number[][]).map((ids) => tokenizer.decode(ids, params.render_special !== true)) }),
  };
  createInterface({ input: process.stdin }).on("line", (line) => {
    if (line.trim() === "") return;
    const { id, method, params } = JSON.parse(line) as { id: number; method: string; params: Record<string, unknown> };
    if (method === "shutdown") {
      send({ id, result: {} });
      process.exit(0);
    }
    const answer = methods[method];
    try {
      send(answer === undefined ? { id, error: { message: `unknown method ${method}` } } : { id, result: answer(params) });
    } catch (error) {
      send({ id, error: { message: (error as Error).message } });
    }
  });
}

main();
