import { Bool, Float64, Int32, Table, Uint32, Utf8, tableToIPC, vectorFromArray, type RecordBatch } from "apache-arrow";
import type { CellRecord } from "./types.js";

/** cells.arrow: Arrow IPC file, one row per cell; columns typed, inapplicable values null. */
export function encodeCellsArrow(cells: readonly CellRecord[]): Uint8Array {
  return tableToIPC(cellsTable(cells), "file");
}

/**
 * cells.arrow for a run that rewrites it after every arm: each cell is encoded once, into a record
 * batch of the cells new since the last rewrite, and the file is assembled from the batches (Arrow
 * files hold any number; readers see one table). Re-encoding every cell at every arm's end cost a
 * parity battery more than its scoring did.
 */
export class CellsArrowFile {
  private readonly batches: RecordBatch[] = [];
  private encoded = 0;

  /** The file's bytes for `cells`, which only ever grows (the run's cells so far). */
  bytes(cells: readonly CellRecord[]): Uint8Array {
    if (cells.length < this.encoded) throw new Error(`cells.arrow: ${cells.length} cells, ${this.encoded} already written (cells are only appended)`);
    if (cells.length > this.encoded) {
      this.batches.push(...cellsTable(cells.slice(this.encoded)).batches);
      this.encoded = cells.length;
    }
    return this.batches.length === 0 ? encodeCellsArrow([]) : tableToIPC(new Table(this.batches), "file");
  }
}

function cellsTable(cells: readonly CellRecord[]): Table {
  const text = (key: keyof CellRecord) => vectorFromArray(cells.map((c) => c[key] as string | null), new Utf8());
  const int = (key: keyof CellRecord) => vectorFromArray(cells.map((c) => c[key] as number | null), new Int32());
  // Cells written before kernel timing existed lack these columns: null, not undefined.
  const float = (key: keyof CellRecord) => vectorFromArray(cells.map((c) => (c[key] ?? null) as number | null), new Float64());
  return new Table({
    suite: text("suite"),
    arm: text("arm"),
    check: text("check"),
    gate: text("gate"),
    prompt: int("prompt"),
    position: int("position"),
    status: text("status"),
    expected_id: int("expected_id"),
    observed_id: int("observed_id"),
    gap_mnats: int("gap_mnats"),
    gap_lower_bound: vectorFromArray(cells.map((c) => c.gap_lower_bound), new Bool()),
    prompt_class: text("prompt_class"),
    niah_length: int("niah_length"),
    niah_depth: vectorFromArray(cells.map((c) => c.niah_depth), new Float64()),
    niah_trial: int("niah_trial"),
    niah_seed: vectorFromArray(cells.map((c) => c.niah_seed), new Uint32()),
    kernel_ratio: float("kernel_ratio"),
    kernel_us_median: float("kernel_us_median"),
    kernel_us_p10: float("kernel_us_p10"),
    kernel_us_p90: float("kernel_us_p90"),
    kernel_in_plugin_us_median: float("kernel_in_plugin_us_median"),
    kernel_gbps: float("kernel_gbps"),
    kernel_gflops: float("kernel_gflops"),
    kernel_bandwidth_fraction: float("kernel_bandwidth_fraction"),
    detail: text("detail"),
    reproduce: text("reproduce"),
  });
}
