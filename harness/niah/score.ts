/** Y: the whole needle is in the output; P: some 4-character piece of it is; N: neither (docs/metrics.md). */
export type NeedleScore = "Y" | "P" | "N";

export function scoreNeedle(output: string, needle: string): NeedleScore {
  if (output.includes(needle)) return "Y";
  for (let i = 0; i + 4 <= needle.length; i++) if (output.includes(needle.slice(i, i + 4))) return "P";
  return "N";
}
