import ts from "typescript";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { PACKAGE_ROOT } from "../harness/paths.js";

/**
 * The project's size limits on its source, so a file stays readable alone: no file over
 * MAX_FILE_LINES lines and no function (declaration, method, arrow, accessor) over
 * MAX_FUNCTION_LINES, counted from its first line to its last. Usage: node dist/scripts/room-sizes.js
 * [directory...] (default: the directories held to it, HELD_DIRECTORIES); exits 1 on any room too
 * large (test/room-sizes.test.ts holds them to it).
 */

export const MAX_FILE_LINES = 450;
export const MAX_FUNCTION_LINES = 100;
/** The directories held to the limits. */
export const HELD_DIRECTORIES = ["server", "harness"] as const;

export interface Oversize {
  /** The file, and for a function its first line and name. */
  readonly where: string;
  readonly lines: number;
  readonly limit: number;
}

function functionName(node: ts.FunctionLikeDeclaration, source: ts.SourceFile): string {
  if (node.name !== undefined) return node.name.getText(source);
  // An arrow or function expression takes the name it is bound to, where it has one.
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) return parent.name.getText(source);
  return "(anonymous)";
}

/** Pure: the file and the functions of one TypeScript source that pass the limits. */
export function oversizeIn(file: string, text: string): Oversize[] {
  const found: Oversize[] = [];
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const lineOf = (position: number) => source.getLineAndCharacterOfPosition(position).line + 1;
  const fileLines = lineOf(text.length) - (text.endsWith("\n") ? 1 : 0);
  if (fileLines > MAX_FILE_LINES) found.push({ where: file, lines: fileLines, limit: MAX_FILE_LINES });
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && "body" in node && node.body !== undefined) {
      const first = lineOf(node.getStart(source));
      const lines = lineOf(node.getEnd()) - first + 1;
      if (lines > MAX_FUNCTION_LINES) found.push({ where: `${file}:${first} ${functionName(node as ts.FunctionLikeDeclaration, source)}`, lines, limit: MAX_FUNCTION_LINES });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function typeScriptFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return typeScriptFiles(path);
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts") ? [path] : [];
  });
}

/** Every room too large under these directories (relative to the package root). */
export function oversizedRooms(directories: readonly string[] = HELD_DIRECTORIES, root = PACKAGE_ROOT): Oversize[] {
  return directories.flatMap((directory) => typeScriptFiles(join(root, directory)))
    .flatMap((file) => oversizeIn(relative(root, file), readFileSync(file, "utf8")));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const directories = process.argv.length > 2 ? process.argv.slice(2) : HELD_DIRECTORIES;
  const found = oversizedRooms(directories);
  for (const o of found) console.log(`${o.where}: ${o.lines} lines (limit ${o.limit})`);
  console.log(`${found.length} file(s) or function(s) over the limits in ${directories.join(", ")}`);
  process.exitCode = found.length > 0 ? 1 : 0;
}
