import ts from "typescript";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { PACKAGE_ROOT } from "../harness/paths.js";

/**
 * The import graph of the harness's own source, and its circles: files that import each other,
 * directly or through others (type-only and dynamic imports count: a type a layer takes from
 * another ties the two as much as a value does). Usage: node dist/scripts/import-circles.js;
 * exits 1 when a circle holds more than two files (test/import-circles.test.ts holds it to that).
 */

/** The source whose imports are followed: a circle may leave harness/ through the server or the kernel ops and come back. */
export const SOURCE_DIRECTORIES = ["harness", "server", "kernels"] as const;

/** Each file (relative to the package root) and the files of the graph it imports. */
export type ImportGraph = ReadonlyMap<string, readonly string[]>;

function typeScriptFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return typeScriptFiles(path);
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts") ? [path] : [];
  });
}

export function importGraph(root = PACKAGE_ROOT, directories: readonly string[] = SOURCE_DIRECTORIES): ImportGraph {
  const files = directories.flatMap((directory) => typeScriptFiles(join(root, directory)));
  const known = new Set(files);
  return new Map(files.map((file) => {
    const imported = ts.preProcessFile(readFileSync(file, "utf8"), true, true).importedFiles
      .filter(({ fileName }) => fileName.startsWith("."))
      .map(({ fileName }) => resolve(dirname(file), fileName.replace(/\.js$/, ".ts")))
      .filter((target) => known.has(target));
    return [relative(root, file), [...new Set(imported)].map((target) => relative(root, target))];
  }));
}

/** The graph's circles: its strongly connected components of two or more files (Tarjan), each sorted, largest first. */
export function importCircles(graph: ImportGraph): string[][] {
  const order = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  const visit = (file: string): void => {
    order.set(file, order.size);
    low.set(file, order.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const next of graph.get(file) ?? []) {
      if (!order.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(file, Math.min(low.get(file)!, order.get(next)!));
      }
    }
    if (low.get(file) !== order.get(file)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1) circles.push(component.sort());
  };
  for (const file of graph.keys()) if (!order.has(file)) visit(file);
  return circles.sort((a, b) => b.length - a.length || a[0].localeCompare(b[0]));
}

/** Every file `from` imports, directly or through others. */
export function reachableFrom(graph: ImportGraph, from: readonly string[]): Set<string> {
  const seen = new Set<string>();
  const pending = [...from];
  for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
    for (const next of graph.get(file) ?? []) {
      if (!seen.has(next)) {
        seen.add(next);
        pending.push(next);
      }
    }
  }
  return seen;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const circles = importCircles(importGraph());
  for (const circle of circles) console.log(`${circle.length} files: ${circle.join(" ")}`);
  const large = circles.filter((circle) => circle.length > 2).length;
  console.log(`${circles.length} import circle(s) in ${SOURCE_DIRECTORIES.join(", ")}; ${large} of more than two files`);
  process.exitCode = large > 0 ? 1 : 0;
}
