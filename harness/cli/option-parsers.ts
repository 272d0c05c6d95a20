import { InvalidArgumentError } from "commander";

/** Option value parsers shared by the commands: commander reports a throw as a one-line error. */
export function wholeNumber(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError("expected a non-negative integer");
  return n;
}

/** A count that must be at least one (--jobs). */
export function positiveCount(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError("expected a whole number of at least 1");
  return n;
}

/** A llama.cpp KV cache type the harness supports. */
export function kvCacheType(value: string): "F32" | "F16" {
  if (value !== "F32" && value !== "F16") throw new InvalidArgumentError("expected F32 or F16");
  return value;
}

/** For repeatable options: each occurrence parsed and appended. */
export const collect = <T>(parse: (v: string) => T) => (value: string, previous: T[]): T[] => [...previous, parse(value)];
