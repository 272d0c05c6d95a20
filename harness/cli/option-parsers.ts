import { InvalidArgumentError } from "commander";

/** Option value parsers shared by the commands: commander reports a throw as a one-line error. */
export function wholeNumber(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError("expected a non-negative integer");
  return n;
}

/** For repeatable options: each occurrence parsed and appended. */
export const collect = <T>(parse: (v: string) => T) => (value: string, previous: T[]): T[] => [...previous, parse(value)];
