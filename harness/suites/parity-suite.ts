import { join } from "node:path";
import { existsSync, readdirSync } from "node:fs";
import { BenchError } from "../errors.js";
import { assertMatchesSchema, readJsonFile } from "../io/json-schema.js";
import { SUITES_DIR } from "../paths.js";
import { didYouMean } from "../registry/did-you-mean.js";

export type GateLevel = "required" | "informational";

export interface ArmSettingsFile {
  readonly flash_attention?: boolean;
  readonly kv_cache_type?: "F32" | "F16";
  readonly threads?: number;
  readonly batch_size?: number;
  readonly context_size?: number;
}

export interface ParityArm {
  readonly label: string;
  readonly model: string;
  readonly sut?: "llamacpp";
  readonly settings?: ArmSettingsFile;
  readonly gate: GateLevel;
  readonly why?: string;
}

/** A parity suite exactly as its JSON file says (schema: suites/schema/parity.schema.json). */
export interface ParitySuite {
  readonly name: string;
  readonly kind: "parity";
  readonly description?: string;
  readonly oracle: { readonly model: string };
  readonly prompts: readonly string[];
  readonly max_tokens: number;
  readonly top_k: number;
  readonly band_mnats: number;
  readonly checks: {
    /** The SUT's own tokenizer must give the goldens' prompt ids (drift is its own check, not a parity failure). */
    readonly tokenizer?: GateLevel;
    readonly greedy_parity: GateLevel;
    readonly teacher_forced?: GateLevel;
    readonly determinism?: { readonly gate: GateLevel; readonly reruns: number };
    readonly batch_invariance?: GateLevel;
  };
  readonly arms: readonly ParityArm[];
  readonly case_timeout_s?: number;
  /** Where it was loaded from (not part of the file). */
  readonly path: string;
}

export function suiteNames(): string[] {
  return readdirSync(SUITES_DIR).filter((f) => f.endsWith(".json")).map((f) => f.replace(/\.json$/, "")).sort();
}

/** Resolves a suite by name (suites/<name>.json) or path, and validates it against its schema. */
export function loadParitySuite(nameOrPath: string): ParitySuite {
  const path = nameOrPath.endsWith(".json") ? nameOrPath : join(SUITES_DIR, `${nameOrPath}.json`);
  if (!existsSync(path)) {
    throw new BenchError(`no such suite "${nameOrPath}"${didYouMean(nameOrPath, suiteNames())}`, { file: path, fix: `use one of ${suiteNames().join(", ")}` });
  }
  const raw = readJsonFile(path);
  const suite = assertMatchesSchema<Omit<ParitySuite, "path">>(raw, join(SUITES_DIR, "schema", "parity.schema.json"), path);
  const labels = new Set<string>();
  for (const arm of suite.arms) {
    if (labels.has(arm.label)) throw new BenchError(`two arms share the label "${arm.label}"`, { file: path, field: "arms", fix: "give each arm its own label" });
    labels.add(arm.label);
  }
  return { ...suite, path };
}
