import { readFileSync } from "node:fs";
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import { BenchError } from "../errors.js";

const ajv = new Ajv({ allErrors: false, strict: true, allowUnionTypes: true, strictRequired: false, validateFormats: false });
const compiled = new Map<string, ValidateFunction>();

function validatorFor(schemaPath: string): ValidateFunction {
  let validate = compiled.get(schemaPath);
  if (validate === undefined) {
    validate = ajv.compile(JSON.parse(readFileSync(schemaPath, "utf8")) as object);
    compiled.set(schemaPath, validate);
  }
  return validate;
}

function describe(error: ErrorObject): { field: string; message: string; fix: string } {
  const field = error.instancePath === "" ? "(top level)" : error.instancePath.slice(1).replaceAll("/", ".");
  if (error.keyword === "additionalProperties") {
    const extra = String((error.params as { additionalProperty: string }).additionalProperty);
    return { field: field === "(top level)" ? extra : `${field}.${extra}`, message: "unknown field", fix: "remove it or check its spelling against the schema" };
  }
  if (error.keyword === "required") {
    const missing = String((error.params as { missingProperty: string }).missingProperty);
    return { field: field === "(top level)" ? missing : `${field}.${missing}`, message: "required field is missing", fix: "add it" };
  }
  return { field, message: error.message ?? "is invalid", fix: "see the schema for the allowed values" };
}

/** Validates `value` against a JSON Schema file; the first violation becomes a one-line BenchError. */
export function assertMatchesSchema<T>(value: unknown, schemaPath: string, file: string): T {
  return assertValid<T>(validatorFor(schemaPath), value, file, "", `schema: ${schemaPath.split("/").slice(-2).join("/")}`);
}

/**
 * Validates part of a file (at `fieldPrefix`, e.g. `cases.3`) against a schema the code holds, such
 * as a kernel op's parameter schema; compiled once per `key`.
 */
export function assertMatchesInlineSchema<T>(value: unknown, key: string, schema: () => object, file: string, fieldPrefix: string, schemaName: string): T {
  let validate = compiled.get(key);
  if (validate === undefined) {
    validate = ajv.compile(schema());
    compiled.set(key, validate);
  }
  return assertValid<T>(validate, value, file, fieldPrefix, schemaName);
}

function assertValid<T>(validate: ValidateFunction, value: unknown, file: string, fieldPrefix: string, schemaName: string): T {
  if (!validate(value)) {
    const { field, message, fix } = describe(validate.errors![0]);
    const where = fieldPrefix === "" ? field : field === "(top level)" ? fieldPrefix : `${fieldPrefix}.${field}`;
    throw new BenchError(message, { file, field: where, fix: `${fix} (${schemaName})` });
  }
  return value as T;
}

/** Reads and parses a JSON file, with a one-line error for unreadable or malformed JSON. */
export function readJsonFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new BenchError(`cannot read (${(error as NodeJS.ErrnoException).code ?? String(error)})`, { file: path, fix: "check the path" });
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new BenchError(`malformed JSON: ${(error as Error).message}`, { file: path, fix: "fix the JSON syntax" });
  }
}
