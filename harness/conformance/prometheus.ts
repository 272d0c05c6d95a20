import { BenchError } from "../errors.js";

/**
 * One sample line: a name, optional labels whose quoted values may hold any character (`}` and
 * escaped quotes included, as the exposition format allows), a value, an optional timestamp.
 */
const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?)\s+(\S+)(?:\s+-?\d+)?$/;

/** A parsed Prometheus text exposition: sample name (with labels) → value. Throws a BenchError naming the line on a malformed one. */
export function parsePrometheusText(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const [i, raw] of text.split("\n").entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const match = SAMPLE.exec(line);
    const where = { field: `/metrics line ${i + 1}`, fix: "the server must answer /metrics in the Prometheus text format" };
    if (match === null) throw new BenchError(`not Prometheus text: ${JSON.stringify(line.slice(0, 120))}`, where);
    const value = match[2] === "+Inf" ? Infinity : match[2] === "-Inf" ? -Infinity : Number(match[2]);
    if (Number.isNaN(value) && match[2] !== "NaN") throw new BenchError(`bad value ${JSON.stringify(match[2].slice(0, 40))}`, where);
    samples.set(match[1], value);
  }
  return samples;
}
