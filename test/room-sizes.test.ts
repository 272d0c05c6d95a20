// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { HELD_DIRECTORIES, MAX_FILE_LINES, MAX_FUNCTION_LINES, oversizedRooms, oversizeIn } from "../scripts/room-sizes.js";

// A file is read alone only while it and its functions stay short enough to read.

const body = (lines: number) => Array.from({ length: lines }, (_, i) => `  const v${i} = ${i};`).join("\n");

test("the measure finds a function and a file one line past their limits, and passes them at the limit", () => {
  // A function of MAX_FUNCTION_LINES lines: its header, the body, the closing brace.
  const atLimit = `export function atLimit(): void {\n${body(MAX_FUNCTION_LINES - 2)}\n}\n`;
  assert.equal(oversizeIn("a.ts", atLimit), []);
  const arrow = `const tooLong = (): void => {\n${body(MAX_FUNCTION_LINES - 1)}\n};\n`;
  assert.equal(oversizeIn("b.ts", arrow), [{ where: "b.ts:1 tooLong", lines: MAX_FUNCTION_LINES + 1, limit: MAX_FUNCTION_LINES }]);
  const method = `class C {\n  run(): void {\n${body(MAX_FUNCTION_LINES - 1)}\n  }\n}\n`;
  assert.equal(oversizeIn("c.ts", method).map((o) => o.where), ["c.ts:2 run"]);
  const manyLines = Array.from({ length: MAX_FILE_LINES + 1 }, (_, i) => `export const x${i} = ${i};`).join("\n") + "\n";
  assert.equal(oversizeIn("d.ts", manyLines), [{ where: "d.ts", lines: MAX_FILE_LINES + 1, limit: MAX_FILE_LINES }]);
  assert.equal(oversizeIn("e.ts", manyLines.split("\n").slice(1).join("\n")), []);
});

test(`no file over ${MAX_FILE_LINES} lines and no function over ${MAX_FUNCTION_LINES} in ${HELD_DIRECTORIES.join(", ")}`, () => {
  const found = oversizedRooms();
  assert.equal(found, [], `split these by job: ${found.map((o) => `${o.where} (${o.lines} lines)`).join("; ")}`);
});

test.run();
