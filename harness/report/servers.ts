import type { StoredRun } from "../results/read-run.js";

/** Conformance checks side by side: one row per check, one column per server arm. */
export interface ConformanceMatrix {
  readonly arms: readonly string[];
  readonly rows: readonly { readonly check: string; readonly cells: readonly ({ readonly status: string; readonly detail: string } | undefined)[] }[];
}

/** What probing found on each HTTP arm: the dialect of every capability, or none. */
export interface DialectRow {
  readonly suite: string;
  readonly arm: string;
  readonly dialect: string;
  readonly byCapability: Readonly<Record<string, string>>;
}

/** The capabilities a dialect may serve, in the order the report lists them. */
export const DIALECT_CAPABILITIES = ["tokenize", "detokenize", "inspectTokens", "greedy", "teacherForced"] as const;

export function conformanceMatrix(run: StoredRun): ConformanceMatrix {
  const cells = run.cells.filter((c) => c.check === "conformance" && c.prompt_class !== null);
  const arms = [...new Set(cells.map((c) => c.arm))];
  const checks = [...new Set(cells.map((c) => c.prompt_class!))];
  return {
    arms,
    rows: checks.map((check) => ({
      check,
      cells: arms.map((arm) => {
        const cell = cells.find((c) => c.arm === arm && c.prompt_class === check);
        // A cell's detail starts with its check's name; the matrix's row already says it.
        return cell === undefined ? undefined : { status: cell.status, detail: cell.detail.replace(`${check}: `, "") };
      }),
    })),
  };
}

/** The rows where the servers' verdicts differ: each is a difference the conformance table in docs/servers.md explains. */
export function conformanceDifferences(matrix: ConformanceMatrix): ConformanceMatrix["rows"] {
  return matrix.rows.filter((row) => new Set(row.cells.map((c) => c?.status ?? "not run")).size > 1);
}

export function dialectRows(run: StoredRun): DialectRow[] {
  return run.summary.suts.filter((s) => s.provenance.kind === "http").map((s) => {
    const settings = (s.provenance.settings ?? {}) as Record<string, unknown>;
    return {
      suite: s.suite, arm: s.arm, dialect: String(settings.dialect ?? "–"),
      byCapability: Object.fromEntries(DIALECT_CAPABILITIES.map((c) => [c, typeof settings[`dialect_${c}`] === "string" ? String(settings[`dialect_${c}`]) : "none (SKIPPED)"])),
    };
  });
}
