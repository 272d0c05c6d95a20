import type { Command } from "commander";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { writeFileAtomic } from "../../io/atomic-write.js";
import { RUNS_DIR } from "../../paths.js";
import { renderHtmlReport } from "../../report/html.js";
import { renderMarkdownReport } from "../../report/markdown.js";
import { viewOfRun } from "../../report/view.js";
import { latestRunDirectory, readRun } from "../../results/read-run.js";
import { say } from "../output.js";

/** chart.js's UMD build, inlined into the page so it opens offline (no CDN). */
function chartJsSource(): string {
  const entry = createRequire(import.meta.url).resolve("chart.js");
  return readFileSync(join(dirname(entry), "chart.umd.min.js"), "utf8");
}

export function registerReport(program: Command): void {
  program
    .command("report")
    .description("write report.md and a self-contained report.html (charts by chart.js) from one run, or compare two runs")
    .argument("[runs...]", "run ids under --runs-dir or run directories, oldest first (default: the latest run)")
    .option("--runs-dir <dir>", "where run directories are", RUNS_DIR)
    .option("--out <dir>", "where to write the report (default: the last run's directory)")
    .action(async (runArgs: string[], options: { runsDir: string; out?: string }) => {
      const runs = (runArgs.length > 0 ? runArgs : [latestRunDirectory(options.runsDir)]).map((id) => readRun(id, options.runsDir));
      const views = runs.map(viewOfRun);
      const out = options.out ?? runs[runs.length - 1].directory;
      const markdown = renderMarkdownReport(views);
      await writeFileAtomic(join(out, "report.md"), markdown);
      await writeFileAtomic(join(out, "report.html"), renderHtmlReport(views, chartJsSource()));
      say(markdown);
      say(`wrote ${join(out, "report.md")} and ${join(out, "report.html")}`);
    });
}
