import ts from "typescript";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { PACKAGE_ROOT } from "../harness/paths.js";

/**
 * The size limits the source is held to, so that each file reads alone: no file over MAX_FILE_LINES
 * lines and no function (a declaration, method, arrow or function expression, nested ones counted
 * in their enclosing function too) over MAX_FUNCTION_LINES lines, counted from its first line to
 * its last. Usage: node dist/scripts/source-limits.js [directory...] (default: harness server);
 * lists what is over and exits 1 when anything is (test/source-limits.test.ts holds the source to it).
 */

export const MAX_FILE_LINES = 450;
export const MAX_FUNCTION_LINES = 100;

/** One file or function over its limit, e.g. `harness/x.ts:12 runAll: 130 lines (limit 100)`. */
export interface OverLimit {
  readonly file: string;
  readonly line: number;
  readonly what: string;
  readonly lines: number;
  readonly limit: number;
}

function typeScriptFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return typeScriptFiles(path);
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts") ? [path] : [];
  });
}

/** What in one source text is over its limit (pure). */
export function overLimitsIn(file: string, text: string): OverLimit[] {
  const over: OverLimit[] = [];
  const fileLines = text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
  if (fileLines > MAX_FILE_LINES) over.push({ file, line: 1, what: "the file", lines: fileLines, limit: MAX_FILE_LINES });
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && (node as ts.FunctionLikeDeclaration).body !== undefined) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const lines = source.getLineAndCharacterOfPosition(node.end).line - first + 1;
      // An arrow or function expression is named by the variable or property it is assigned to.
      const named = (node as ts.FunctionLikeDeclaration).name ?? (ts.isVariableDeclaration(node.parent) || ts.isPropertyAssignment(node.parent) ? node.parent.name : undefined);
      const name = named?.getText(source) ?? "(anonymous function)";
      if (lines > MAX_FUNCTION_LINES) over.push({ file, line: first + 1, what: name, lines, limit: MAX_FUNCTION_LINES });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return over;
}

/** Everything over its limit in these directories (relative to the package root). */
export function overLimits(directories: readonly string[], root = PACKAGE_ROOT): OverLimit[] {
  return directories.flatMap((directory) => typeScriptFiles(join(root, directory)))
    .flatMap((path) => overLimitsIn(relative(root, path), readFileSync(path, "utf8")));
}

export const describeOverLimit = (o: OverLimit): string => `${o.file}:${o.line} ${o.what}: ${o.lines} lines (limit ${o.limit})`;

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const directories = process.argv.length > 2 ? process.argv.slice(2) : ["harness", "server"];
  const over = overLimits(directories);
  for (const o of over) console.log(describeOverLimit(o));
  console.log(`${over.length} over the limits (files ${MAX_FILE_LINES} lines, functions ${MAX_FUNCTION_LINES}) in ${directories.join(", ")}`);
  process.exitCode = over.length > 0 ? 1 : 0;
}
