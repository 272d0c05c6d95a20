// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { describeOverLimit, MAX_FILE_LINES, MAX_FUNCTION_LINES, overLimits, overLimitsIn } from "../scripts/source-limits.js";

// Each file reads alone: no file over 450 lines, no function over 100 (scripts/source-limits.ts).

test("the measure counts a function and an arrow from first line to last, and a file's lines", () => {
  const body = (n: number) => Array.from({ length: n }, (_, i) => `  const v${i} = ${i};`).join("\n");
  const source = [
    `export function long(): void {\n${body(MAX_FUNCTION_LINES - 1)}\n}`,
    `const arrow = () => {\n${body(MAX_FUNCTION_LINES)}\n};`,
    `function short(): void {\n${body(MAX_FUNCTION_LINES - 2)}\n}`,
  ].join("\n");
  assert.equal(overLimitsIn("x.ts", source).map(describeOverLimit), [
    `x.ts:1 long: ${MAX_FUNCTION_LINES + 1} lines (limit ${MAX_FUNCTION_LINES})`,
    `x.ts:${MAX_FUNCTION_LINES + 2} arrow: ${MAX_FUNCTION_LINES + 2} lines (limit ${MAX_FUNCTION_LINES})`,
  ]);
  const longFile = `${"// a line\n".repeat(MAX_FILE_LINES + 1)}`;
  assert.equal(overLimitsIn("y.ts", longFile).map(describeOverLimit), [`y.ts:1 the file: ${MAX_FILE_LINES + 1} lines (limit ${MAX_FILE_LINES})`]);
  assert.equal(overLimitsIn("z.ts", "// a line\n".repeat(MAX_FILE_LINES)), []);
});

test("harness/ meets the limits", () => {
  assert.equal(overLimits(["harness"]).map(describeOverLimit), []);
});

// server/ is being split into rooms on another branch (issue #44): once that is merged, add
// "server" to the list above (one word) and delete this note.

test.run();
