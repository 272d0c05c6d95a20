/**
 * A problem the user can fix: bad input, configuration or infrastructure.
 * The CLI turns it into one line and exit code 2 (DESIGN.md exit-code contract).
 * `file` and `field` say where the problem is; `fix` says what to do about it.
 */
export class BenchError extends Error {
  readonly file: string | undefined;
  readonly field: string | undefined;
  readonly fix: string | undefined;

  constructor(message: string, where: { file?: string; field?: string; fix?: string } = {}) {
    super(message);
    this.name = "BenchError";
    this.file = where.file;
    this.field = where.field;
    this.fix = where.fix;
  }

  /**
   * The one line printed for this error. Fields often quote the input (a tensor name, a JSON key):
   * line breaks in them are escaped, so a file cannot forge the lines that follow ours.
   */
  oneLine(): string {
    const location = [this.file, this.field].filter((part) => part !== undefined).join(": ");
    const fix = this.fix === undefined ? "" : ` (fix: ${this.fix})`;
    return `${location === "" ? "" : `${location}: `}${this.message}${fix}`.replace(/[\r\n]/g, (c) => (c === "\n" ? "\\n" : "\\r"));
  }
}
