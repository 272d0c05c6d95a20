/** A parsed Prometheus text exposition: sample name (with labels) → value. Throws on a malformed line. */
export function parsePrometheusText(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const [i, raw] of text.split("\n").entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("# HELP ") || line.startsWith("# TYPE ")) continue;
    if (line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?)\s+(\S+)(?:\s+\d+)?$/.exec(line);
    if (match === null) throw new Error(`line ${i + 1} is not Prometheus text: ${JSON.stringify(line)}`);
    const value = match[2] === "+Inf" ? Infinity : match[2] === "-Inf" ? -Infinity : Number(match[2]);
    if (Number.isNaN(value) && match[2] !== "NaN") throw new Error(`line ${i + 1}: bad value ${match[2]}`);
    samples.set(match[1], value);
  }
  return samples;
}
