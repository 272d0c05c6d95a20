import { existsSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { BenchError } from "../errors.js";
import { assertMatchesSchema, readJsonFile } from "../io/json-schema.js";
import { KERNELS_DIR, SUITES_DIR } from "../paths.js";
import { didYouMean } from "../registry/did-you-mean.js";
import type { NiahSuite } from "./niah-suite.js";
import type { ParitySuite } from "./parity-suite.js";
import { promptTexts, type PromptEntry } from "./prompt-text.js";
import type { ConformanceSuite } from "./conformance-suite.js";
import type { KernelSuite } from "./kernel-suite.js";
import type { ReuseSuite } from "./reuse-suite.js";
import type { SpeculativeSuite } from "./speculative-suite.js";
import type { TokenizerSuite } from "./tokenizer-suite.js";
import type { ChatTemplateSuite } from "./chat-template-suite.js";
import type { PerplexitySuite } from "./perplexity-suite.js";
import type { SamplingSuite } from "./sampling-suite.js";
import { edgeCases } from "../../kernels/edge-cases.js";
import { validateKernelCase } from "../../kernels/ops/registry.js";
import { assertLogprobToleranceWithinLimit } from "../conformance/greedy-logprobs.js";

export type Suite = ParitySuite | NiahSuite | ConformanceSuite | KernelSuite | ReuseSuite | SpeculativeSuite | TokenizerSuite | ChatTemplateSuite | PerplexitySuite | SamplingSuite;

/** Where each suite kind's schema is: suites/schema/<kind>.schema.json (the runner's kind registry holds its plug-in; test/suite-kinds-complete.test.ts keeps the two in step). */
export const SCHEMA_DIR = join(SUITES_DIR, "schema");

/** The suite kinds a suite file may name: those with a schema. */
export function schemaKinds(): string[] {
  return readdirSync(SCHEMA_DIR).filter((file) => file.endsWith(".schema.json")).map((file) => file.replace(/\.schema\.json$/, "")).sort();
}

/** Model suites live in suites/, kernel suites in kernels/ (DESIGN.md layout). */
const SUITE_DIRS = [SUITES_DIR, KERNELS_DIR];

export function suiteNames(): string[] {
  return SUITE_DIRS.flatMap((dir) => readdirSync(dir)).filter((f) => f.endsWith(".json")).map((f) => f.replace(/\.json$/, "")).sort();
}

/**
 * How a command line names this suite so that `loadSuite` finds this very file again: its name
 * for a built-in suite, its path for one of the user's (whose name alone resolves to nothing).
 */
export function suiteArgument(suite: Pick<Suite, "name" | "path">): string {
  const byName = SUITE_DIRS.map((dir) => join(dir, `${suite.name}.json`)).find((candidate) => existsSync(candidate));
  if (byName !== undefined && resolve(byName) === resolve(suite.path)) return suite.name;
  return /^[\w./-]+$/.test(suite.path) ? suite.path : JSON.stringify(suite.path);
}

/** Resolves a suite by name (suites/<name>.json) or path, and validates it against its kind's schema. */
export function loadSuite(nameOrPath: string): Suite {
  const path = nameOrPath.endsWith(".json") ? nameOrPath
    : SUITE_DIRS.map((dir) => join(dir, `${nameOrPath}.json`)).find((candidate) => existsSync(candidate)) ?? join(SUITES_DIR, `${nameOrPath}.json`);
  if (!existsSync(path)) {
    throw new BenchError(`no such suite "${nameOrPath}"${didYouMean(nameOrPath, suiteNames())}`, { file: path, fix: `use one of ${suiteNames().join(", ")}` });
  }
  const raw = readJsonFile(path);
  const kind = (raw as { kind?: unknown } | null)?.kind;
  if (typeof kind !== "string" || !schemaKinds().includes(kind)) {
    throw new BenchError(`unknown suite kind ${JSON.stringify(kind)}`, { file: path, field: "kind", fix: `use one of ${schemaKinds().join(", ")}` });
  }
  const suite = assertMatchesSchema<Omit<Suite, "path">>(raw, join(SCHEMA_DIR, `${kind}.schema.json`), path);
  const labels = new Set<string>();
  for (const arm of suite.arms) {
    if (labels.has(arm.label)) throw new BenchError(`two arms share the label "${arm.label}"`, { file: path, field: "arms", fix: "give each arm its own label" });
    labels.add(arm.label);
  }
  if (suite.kind === "conformance") {
    (suite as Omit<ConformanceSuite, "path">).arms.forEach((arm, i) => {
      if (arm.logprob_tolerance !== undefined) assertLogprobToleranceWithinLimit(arm.logprob_tolerance, path, `arms.${i}.logprob_tolerance`);
    });
  }
  if (suite.kind === "kernels") {
    const kernels = suite as Omit<KernelSuite, "path">;
    // Generated edge cases follow the written ones, so a written case keeps its index.
    const cases = [...kernels.cases, ...(kernels.edges === undefined ? [] : edgeCases(kernels.edges))];
    return { ...kernels, cases: cases.map((c, i) => validateKernelCase(c, path, i)), path };
  }
  if (suite.kind === "parity") {
    const parity = suite as Omit<ParitySuite, "path" | "prompts"> & { prompts: readonly PromptEntry[] };
    return { ...parity, prompts: promptTexts(parity.prompts, path), path };
  }
  return { ...suite, path } as Suite;
}

export function loadParitySuite(nameOrPath: string): ParitySuite {
  const suite = loadSuite(nameOrPath);
  if (suite.kind !== "parity") throw new BenchError(`suite ${suite.name} is a ${suite.kind} suite, a parity suite is needed here`, { file: suite.path, field: "kind", fix: "pass a parity suite" });
  return suite;
}
