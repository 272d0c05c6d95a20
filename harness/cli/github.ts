import { appendFileSync } from "node:fs";

/**
 * GitHub Actions output: `::error::` / `::warning::` annotations and the job's step summary.
 * Active only under GitHub Actions; elsewhere these do nothing.
 */
const active = process.env.GITHUB_ACTIONS === "true";

export function annotate(level: "error" | "warning", title: string, message: string): void {
  if (!active) return;
  const clean = (text: string) => text.replace(/%/g, "%25").replace(/\r/g, "%0D").replace(/\n/g, "%0A");
  process.stdout.write(`::${level} title=${clean(title).replace(/,/g, "%2C").replace(/:/g, "%3A")}::${clean(message)}\n`);
}

export function appendStepSummary(markdown: string): void {
  const path = process.env.GITHUB_STEP_SUMMARY;
  if (path === undefined || path === "") return;
  appendFileSync(path, `${markdown}\n`);
}
