import { BenchError } from "../harness/errors.js";

/*
 * A bench script's settings from the environment: each read once, and a bad value is a one-line
 * error naming the variable and the fix, never NaN carried into a run.
 */

/** A whole number ≥ 1, or `fallback` when the variable is unset or empty. */
export function wholeNumberFromEnv(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === "") return fallback;
  if (!/^[1-9]\d*$/.test(text)) throw new BenchError(`must be a whole number ≥ 1 (got ${JSON.stringify(text)})`, { field: name, fix: `unset it, or give e.g. ${name}=${fallback}` });
  return Number(text);
}

/** A positive number, or `fallback` when the variable is unset or empty. */
export function positiveNumberFromEnv(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === "") return fallback;
  const value = Number(text);
  if (!(Number.isFinite(value) && value > 0)) throw new BenchError(`must be a number > 0 (got ${JSON.stringify(text)})`, { field: name, fix: `unset it, or give e.g. ${name}=${fallback}` });
  return value;
}

/** A comma-separated list of positive numbers (whole where `whole`), or `fallback`; an empty value is an empty list. */
export function numberListFromEnv(name: string, fallback: readonly number[], whole: boolean): readonly number[] {
  const text = process.env[name];
  if (text === undefined) return fallback;
  if (text.trim() === "") return [];
  const values = text.split(",").map((part) => Number(part.trim()));
  if (!values.every((value) => Number.isFinite(value) && value > 0 && (!whole || Number.isInteger(value)))) {
    throw new BenchError(`must be a comma-separated list of ${whole ? "whole numbers ≥ 1" : "numbers > 0"} (got ${JSON.stringify(text)})`, { field: name, fix: `unset it, or give e.g. ${name}=${fallback.join(",")}` });
  }
  return values;
}
