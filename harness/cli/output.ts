/**
 * Everything the CLI prints goes through here: results to stdout, progress and warnings to
 * stderr. Progress redraws one line on a TTY and is silent otherwise (CI logs stay line-oriented);
 * colour honours NO_COLOR.
 */
const interactive = process.stderr.isTTY === true && process.env.CI === undefined;
const colour = process.stdout.isTTY === true && process.env.NO_COLOR === undefined;

export function paint(text: string, tone: "red" | "green" | "yellow" | "bold"): string {
  if (!colour) return text;
  const codes = { red: 31, green: 32, yellow: 33, bold: 1 } as const;
  return `\u001b[${codes[tone]}m${text}\u001b[0m`;
}

let progressShown = false;

export function progress(message: string): void {
  if (!interactive) return;
  process.stderr.write(`\r\u001b[2K${message}`);
  progressShown = true;
}

export function clearProgress(): void {
  if (!progressShown) return;
  process.stderr.write("\r\u001b[2K");
  progressShown = false;
}

export function say(line: string): void {
  clearProgress();
  process.stdout.write(`${line}\n`);
}

export function warn(message: string, hint?: string): void {
  clearProgress();
  process.stderr.write(`${paint("warning", "yellow")}: ${message}${hint === undefined ? "" : `\n  hint: ${hint}`}\n`);
}

/** A line that stays in the log, on a terminal and in CI alike (a wait for the device lock, a failed reset). */
export function notice(message: string): void {
  clearProgress();
  process.stderr.write(`${message}\n`);
}
