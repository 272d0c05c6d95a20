/**
 * The naming rules `promtool check metrics` enforces (Prometheus's metric and label naming
 * guide), for a scrape of any server: so the conformance suite holds a server to them where
 * promtool is not installed. One problem per line, promtool's wording where it has one.
 */
const NON_BASE_UNITS: Readonly<Record<string, string>> = {
  milliseconds: "seconds", millis: "seconds", microseconds: "seconds", micros: "seconds", nanoseconds: "seconds", nanos: "seconds",
  minutes: "seconds", hours: "seconds", days: "seconds", weeks: "seconds",
  kilobytes: "bytes", megabytes: "bytes", gigabytes: "bytes", terabytes: "bytes", petabytes: "bytes",
  fahrenheit: "celsius", kelvin: "celsius",
};

export function lintPrometheusText(text: string): string[] {
  const problems: string[] = [];
  const help = new Set<string>();
  const types = new Map<string, string>();
  const sampled = new Set<string>();
  for (const line of text.split("\n")) {
    const helpMatch = /^# HELP (\S+) ?(.*)$/.exec(line);
    if (helpMatch !== null) { if (helpMatch[2].trim() !== "") help.add(helpMatch[1]); continue; }
    const typeMatch = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (typeMatch !== null) { types.set(typeMatch[1], typeMatch[2]); continue; }
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line);
    if (sample !== null && !line.startsWith("#")) sampled.add(sample[1]);
  }
  const family = (sample: string) => [...types.keys()].find((name) => sample === name || (["histogram", "summary"].includes(types.get(name)!) && /^_(bucket|count|sum)$/.test(sample.slice(name.length)) && sample.startsWith(name))) ?? sample;
  const families = new Set([...sampled].map(family));
  for (const name of families) {
    const type = types.get(name) ?? "untyped";
    const say = (problem: string) => problems.push(`${name}: ${problem}`);
    if (!help.has(name)) say("no help text");
    if (type === "counter" && !name.endsWith("_total")) say('counter metrics should have "_total" suffix');
    if (type !== "counter" && name.endsWith("_total")) say('non-counter metrics should not have "_total" suffix');
    for (const suffix of ["_count", "_sum", "_bucket"]) {
      if (type !== "histogram" && type !== "summary" && name.endsWith(suffix)) say(`non-histogram and non-summary metrics should not have "${suffix}" suffix`);
    }
    if (/[a-z][A-Z]/.test(name)) say("metric names should be written in 'snake_case' not 'camelCase'");
    if (name.includes(":")) say("metric names should not contain ':'");
    for (const word of name.split("_")) {
      if (word in NON_BASE_UNITS) say(`use base unit "${NON_BASE_UNITS[word]}" instead of "${word}"`);
    }
  }
  return problems;
}
