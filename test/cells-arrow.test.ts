// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { tableFromIPC } from "apache-arrow";
import { CellsArrowFile, encodeCellsArrow } from "../harness/results/cells-arrow.js";
import type { CellRecord } from "../harness/results/types.js";

function cell(i: number): CellRecord {
  return {
    suite: "parity16", arm: i % 2 === 0 ? "F32" : "Q8_0", check: "greedy_parity", gate: "required", prompt: i, position: i % 3 === 0 ? null : i,
    status: i % 5 === 0 ? "fail" : "pass", expected_id: i, observed_id: i % 5 === 0 ? i + 1 : i, gap_mnats: i % 5 === 0 ? 120 : 0, gap_lower_bound: i % 7 === 0 ? null : false,
    prompt_class: "STRICT", niah_length: null, niah_depth: i % 4 === 0 ? 0.25 : null, niah_trial: null, niah_seed: i % 4 === 0 ? 4_000_000_000 : null,
    kernel_ratio: null, kernel_us_median: i % 6 === 0 ? 1.5 : null, kernel_us_p10: null, kernel_us_p90: null, kernel_in_plugin_us_median: null,
    kernel_gbps: null, kernel_gflops: null, kernel_bandwidth_fraction: null, detail: `cell ${i} ünïcode`, reproduce: `bench run --prompt ${i}`,
  };
}

const rows = (bytes: Uint8Array) => tableFromIPC(bytes).toArray().map((row) => row.toJSON());

test("cells.arrow grown arm by arm reads back as the same table as one written from every cell at once", () => {
  const file = new CellsArrowFile();
  const cells: CellRecord[] = [];
  assert.equal(rows(file.bytes(cells)), rows(encodeCellsArrow([])), "an empty run's file is the empty table");
  for (const added of [3, 0, 5, 1]) {
    cells.push(...Array.from({ length: added }, (_, i) => cell(cells.length + i)));
    const grown = file.bytes(cells);
    assert.equal(rows(grown), rows(encodeCellsArrow(cells)), `${cells.length} cells`);
    assert.is(String(tableFromIPC(grown).schema), String(tableFromIPC(encodeCellsArrow(cells)).schema));
  }
  assert.is(rows(file.bytes(cells)).length, 9);
  assert.throws(() => file.bytes(cells.slice(0, 2)), /cells are only appended/);
});

test.run();
