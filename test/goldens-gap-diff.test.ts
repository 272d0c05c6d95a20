// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import type { Goldens } from "../harness/goldens/goldens.js";
import { goldensGapDiff, renderGapDiff } from "../harness/goldens/gap-diff.js";
import type { GoldensManifest } from "../harness/goldens/manifest.js";
import { bench } from "./helpers/workspace.js";

/** Goldens with P = 2, T = 2, K = 2: only what the diff reads is filled. */
function goldens(greedyIds: number[][], topkLogprobs: number[][][]): Goldens {
  return { manifest: { K: 2 } as GoldensManifest, directory: "goldens/m/s", promptIds: [[1], [1]], greedyIds, topkLogprobs };
}

test("the gap diff counts moved greedy ids per prompt and token, and the top-1/top-2 gap's minimum and median before and after", () => {
  const before = goldens([[5, 6], [7, 8]], [[[-0.1, -2.1], [-0.5, -0.503]], [[-1, -2], [-1, -4]]]);
  const after = goldens([[5, 9], [7, 8]], [[[-0.1, -2.1], [-0.5, -0.6]], [[-1, -2], [-1, -4]]]);
  const diff = goldensGapDiff(before, after);
  assert.equal([diff.promptsChanged, diff.promptCount, diff.tokensChanged, diff.tokenCount], [1, 2, 1, 4]);
  // Before: gaps 2000, 3, 1000, 3000 mnats; after: 2000, 100, 1000, 3000.
  assert.equal([Math.round(diff.before!.minMnats), Math.round(diff.before!.medianMnats)], [3, 1500]);
  assert.equal([Math.round(diff.after!.minMnats), Math.round(diff.after!.medianMnats)], [100, 1500]);
  assert.is(renderGapDiff(diff), "goldens/m/s: greedy ids 1/2 prompts (1/4 tokens) changed; top-1/top-2 gap min 3 → 100 mnats, median 1500 → 1500");
});

test("bench goldens make --all re-makes every directory in place: --model or --out with it is refused in one line, exit 2", () => {
  const result = bench(["goldens", "make", "--all", "--model", "tiny-random:F32"]);
  assert.is(result.status, 2);
  assert.match(result.stderr, /--all re-makes every committed goldens directory in place/);
});

test.run();
