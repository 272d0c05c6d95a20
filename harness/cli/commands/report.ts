import type { Command } from "commander";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { BenchError } from "../../errors.js";
import { readBaseline } from "../../gates/baseline.js";
import { writeFileAtomic } from "../../io/atomic-write.js";
import { assertMatchesSchema } from "../../io/json-schema.js";
import { RUNS_DIR } from "../../paths.js";
import { HISTORY_SCHEMA, historyDocument, historyOfRuns } from "../../report/history.js";
import { renderHtmlReport } from "../../report/html.js";
import { renderMarkdownReport } from "../../report/markdown.js";
import { selectRuns } from "../../report/select-runs.js";
import { viewOfRun } from "../../report/view.js";
import { say } from "../output.js";

/** chart.js's UMD build, inlined into the page so it opens offline (no CDN). */
function chartJsSource(): string {
  const entry = createRequire(import.meta.url).resolve("chart.js");
  return readFileSync(join(dirname(entry), "chart.umd.min.js"), "utf8");
}

interface ReportOptions {
  runsDir: string;
  out?: string;
  last?: string;
  baseline?: string;
  json?: string;
}

function positiveCount(text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new BenchError(`--last must be a whole number of runs ≥ 1, not "${text}"`, { field: "--last", fix: "e.g. --last 30" });
  return n;
}

export function registerReport(program: Command): void {
  program
    .command("report")
    .description("write report.md, a self-contained report.html (charts by chart.js) and history.json over one run or a history of runs: verdict first, then changes and trends")
    .argument("[runs...]", "run ids under --runs-dir, run directories, or directories of runs (default: the latest run); ordered by the start time each recorded")
    .option("--runs-dir <dir>", "where run directories are", RUNS_DIR)
    .option("--last <n>", "the N most recent runs under --runs-dir (with any runs named too)")
    .option("--baseline <file>", "draw bench gate's bands from this baseline and list changes beyond them (default: each kind's band around the first run on a machine)")
    .option("--out <dir>", "where to write the report (default: the latest run's directory)")
    .option("--json <file>", "where to write the history as JSON (default: <out>/history.json; schema reports/history.schema.json)")
    .action(async (runArgs: string[], options: ReportOptions) => {
      const last = options.last === undefined ? undefined : positiveCount(options.last);
      const baseline = options.baseline === undefined ? undefined : { file: options.baseline, baseline: readBaseline(options.baseline) };
      const { runs, unreadable } = selectRuns(runArgs, options.runsDir, last);
      const latestRun = runs[runs.length - 1];
      const history = historyOfRuns(runs, baseline, unreadable);
      const latest = viewOfRun(latestRun);
      const out = options.out ?? latestRun.directory;
      const jsonPath = options.json ?? join(out, "history.json");
      const document = assertMatchesSchema(historyDocument(history), HISTORY_SCHEMA, jsonPath);
      const markdown = renderMarkdownReport(history, latest);
      await writeFileAtomic(join(out, "report.md"), markdown);
      await writeFileAtomic(join(out, "report.html"), renderHtmlReport(history, latest, chartJsSource()));
      await writeFileAtomic(jsonPath, `${JSON.stringify(document, null, 2)}\n`);
      say(markdown);
      say(`wrote ${join(out, "report.md")}, ${join(out, "report.html")} and ${jsonPath}`);
    });
}
