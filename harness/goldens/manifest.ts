import { join } from "node:path";
import type { CpuIdentity } from "../cpu/cpu-identity.js";
import { assertMatchesSchema, readJsonFile } from "../io/json-schema.js";
import { GOLDENS_DIR } from "../paths.js";

/** goldens/<model>/<suite>/manifest.json (schema: goldens/manifest.schema.json). */
export interface GoldensManifest {
  readonly schema_version: 1;
  readonly suite: string;
  readonly model: { readonly id: string; readonly file: string; readonly sha256: string; readonly bytes: number };
  /** `cpu`: where the oracle computed (absent from goldens made before it was recorded, and from imported ones). */
  readonly oracle: { readonly name: string; readonly engine: string; readonly settings: Readonly<Record<string, string | number | boolean>>; readonly source?: string; readonly cpu?: CpuIdentity };
  readonly tokenizer: { readonly fingerprint: string };
  readonly prompts: { readonly count: number; readonly texts_sha256: string | null; readonly ids_sha256: string };
  readonly T: number;
  readonly K: number;
  readonly sampler: { readonly temperature: 0; readonly decoding: "greedy" };
  readonly files: Readonly<Record<string, string>>;
  readonly created: string;
  readonly harness_version: string;
}

export const MANIFEST_SCHEMA = join(GOLDENS_DIR, "manifest.schema.json");

export function readManifest(path: string): GoldensManifest {
  return assertMatchesSchema<GoldensManifest>(readJsonFile(path), MANIFEST_SCHEMA, path);
}

/**
 * Creation time; honours SOURCE_DATE_EPOCH (the reproducible-builds convention) so that two
 * processes can produce byte-identical goldens on purpose.
 */
export function creationTime(): string {
  const epoch = process.env.SOURCE_DATE_EPOCH;
  return (epoch !== undefined && /^\d+$/.test(epoch) ? new Date(Number(epoch) * 1000) : new Date()).toISOString();
}
