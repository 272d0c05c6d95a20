import { join } from "node:path";
import { BenchError } from "../errors.js";
import { assertMatchesInlineSchema, assertMatchesSchema, readJsonFile } from "../io/json-schema.js";
import { PACKAGE_ROOT } from "../paths.js";
import type { Evidence } from "../results/legs.js";

export const SIGNATURES_FILE = join(PACKAGE_ROOT, "box", "signatures.json");
const SIGNATURES_SCHEMA = join(PACKAGE_ROOT, "box", "signatures.schema.json");

type FieldType = "bytes" | "integer" | "number" | "text";

/** One known failure signature (box/signatures.schema.json): data, so a team adds its own without touching code. */
export interface Signature {
  readonly name: string;
  readonly kind: string;
  readonly pattern: string;
  readonly fields: Readonly<Record<string, FieldType>>;
  readonly summary: readonly string[];
}

/** A compiled signature, its pattern checked once when it is loaded. */
export interface CompiledSignature extends Signature {
  readonly regex: RegExp;
}

/** Most evidence items kept per arm: a runner that loops on one error prints it thousands of times. */
const MAX_EVIDENCE = 10;

function compile(signatures: readonly Signature[], file: string, field: string): CompiledSignature[] {
  return signatures.map((signature, i) => {
    let regex: RegExp;
    try {
      regex = new RegExp(signature.pattern, "g");
    } catch (error) {
      throw new BenchError(`not a regular expression: ${(error as Error).message}`, { file, field: `${field}.${i}.pattern`, fix: "write a JavaScript regular expression (named groups become fields)" });
    }
    const groups = [...signature.pattern.matchAll(/\(\?<([A-Za-z_][A-Za-z0-9_]*)>/g)].map((m) => m[1]);
    const untyped = groups.find((group) => signature.fields[group] === undefined);
    if (untyped !== undefined) throw new BenchError(`the pattern's group "${untyped}" has no type in fields`, { file, field: `${field}.${i}.fields`, fix: `add "${untyped}": "bytes" (or integer, number, text)` });
    const unmatched = Object.keys(signature.fields).find((name) => !groups.includes(name));
    if (unmatched !== undefined) throw new BenchError(`fields names "${unmatched}", which the pattern has no group for`, { file, field: `${field}.${i}.fields`, fix: `add (?<${unmatched}>...) to the pattern or drop the field` });
    return { ...signature, regex };
  });
}

/** The signatures shipped in box/signatures.json. */
export function shippedSignatures(): CompiledSignature[] {
  const data = assertMatchesSchema<{ signatures: Signature[] }>(readJsonFile(SIGNATURES_FILE), SIGNATURES_SCHEMA, SIGNATURES_FILE);
  return compile(data.signatures, SIGNATURES_FILE, "signatures");
}

/** A team's own signatures from its config (`evidence.signatures`), checked like the shipped ones. */
export function configuredSignatures(signatures: readonly unknown[], file: string): CompiledSignature[] {
  const schema = () => readJsonFile(SIGNATURES_SCHEMA) as object;
  const checked = assertMatchesInlineSchema<{ signatures: Signature[] }>({ signatures }, SIGNATURES_SCHEMA, schema, file, "evidence", "schema: box/signatures.schema.json");
  return compile(checked.signatures, file, "evidence.signatures");
}

const UNIT_BYTES: Readonly<Record<string, number>> = { "": 1, b: 1, kb: 1e3, mb: 1e6, gb: 1e9, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30 };

/** "1,073,725,440", "1073725440B" or "12.7 MB" (SI) / "12.7 MiB" as bytes; undefined when it is none of these. */
export function parseBytes(text: string): number | undefined {
  const match = /^([\d,]+(?:\.\d+)?)\s*([KMG]i?B|B)?$/i.exec(text.trim());
  if (match === null) return undefined;
  const scale = UNIT_BYTES[(match[2] ?? "").toLowerCase()];
  const value = Number(match[1].replaceAll(",", ""));
  return Number.isFinite(value) && scale !== undefined ? Math.round(value * scale) : undefined;
}

function readField(type: FieldType, text: string): number | string | undefined {
  if (type === "text") return text.trim();
  if (type === "bytes") return parseBytes(text);
  const value = Number(text.replaceAll(",", ""));
  if (!Number.isFinite(value) || (type === "integer" && !Number.isInteger(value))) return undefined;
  return value;
}

/** 1073725440 → "1,073,725,440 B": the spelling the field's logs use. */
export function formatBytes(bytes: number): string {
  return `${bytes.toLocaleString("en-US")} B`;
}

/** The summary parts whose {fields} all matched, filled in and joined. */
function summarise(signature: Signature, fields: Readonly<Record<string, number | string>>): string {
  const show = (name: string) => {
    const value = fields[name];
    return typeof value === "number" && signature.fields[name] === "bytes" ? formatBytes(value) : String(value);
  };
  const parts = signature.summary.filter((part) => [...part.matchAll(/\{(\w+)\}/g)].every((m) => fields[m[1]] !== undefined));
  return parts.map((part) => part.replace(/\{(\w+)\}/g, (_, name: string) => show(name))).join(", ");
}

/** Every signature found in a stderr tail, in the order the signatures are listed; repeats of one finding are kept once. */
export function findEvidence(text: string, signatures: readonly CompiledSignature[]): Evidence[] {
  const found: Evidence[] = [];
  const seen = new Set<string>();
  for (const signature of signatures) {
    for (const match of text.matchAll(signature.regex)) {
      const fields: Record<string, number | string> = {};
      for (const [name, type] of Object.entries(signature.fields)) {
        const raw = match.groups?.[name];
        const value = raw === undefined ? undefined : readField(type, raw);
        if (value !== undefined) fields[name] = value;
      }
      const evidence = { kind: signature.kind, summary: summarise(signature, fields), source: signature.name, fields, matched: match[0].slice(0, 500) };
      const key = JSON.stringify([evidence.kind, evidence.fields]);
      if (seen.has(key)) continue;
      seen.add(key);
      found.push(evidence);
      if (found.length >= MAX_EVIDENCE) return found;
    }
  }
  return found;
}
