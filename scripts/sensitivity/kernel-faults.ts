/**
 * The kernel half of `npm run sensitivity -- --kernels`: each FAKE kernel plugin of the catalogue
 * (test/helpers/fake_plugin.c, the reference plugin with one planted fault) runs the shipped
 * kernel suite through the real `bench run --plugin`, and the table says which cases caught it and
 * at what ratio to their bound. A fault no case catches is a hole in the suite: the run says so
 * and exits 1.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { PACKAGE_ROOT } from "../../harness/paths.js";
import { readRun } from "../../harness/results/read-run.js";
import type { CellRecord } from "../../harness/results/types.js";
import { buildFakePlugin, type FakeFault } from "../../test/helpers/fake-plugin.js";

export interface KernelFault {
  readonly fault: FakeFault;
  readonly what: string;
}

/** The catalogue of issue #27, in its order; each fault's plant is described in fake_plugin.c's header. */
export const KERNEL_FAULTS: readonly KernelFault[] = [
  { fault: "HALF_ACCUM", what: "Q8_0 matvec sums each block's partial sum in fp16" },
  { fault: "DOUBLE_BF16", what: "bf16 grouped matmul rounds its partial sum to bf16 halfway through K, then stores" },
  { fault: "EPS_AFTER_SQRT", what: "rms_norm adds ε after the square root" },
  { fault: "NO_MAX_SUB", what: "softmax without max subtraction" },
  { fault: "UNWRITTEN_ROW", what: "grouped matmul leaves its last output row unwritten" },
  { fault: "LAST_ELEMENT", what: "every op leaves the last element of its first output unwritten" },
  { fault: "WINDOW_OFF", what: "sdpa attends one slot past its sliding window" },
  { fault: "HEADS_TILED", what: "sdpa maps query head h to kv head h mod Hkv (tiled) where the contract is grouped; gdn ignores heads: grouped" },
  { fault: "NO_STATE", what: "gdn, conv1d and ssd return state_in as state_out" },
  { fault: "DK_DV_SWAPPED", what: "sdpa steps through v with k's row length (Dk for Dv)" },
  { fault: "EXPERT_OFF", what: "grouped matmul reads expert ids[p] + 1" },
];

export interface KernelFaultRow {
  readonly fault: KernelFault;
  readonly exitCode: number | null;
  readonly cases: number;
  readonly caught: readonly CellRecord[];
  /** Cases of the caught op/encoding pairs that still pass: what a suite without those edges would have shown. */
  readonly passedAlongside: number;
}

const caseKey = (cell: CellRecord) => `${cell.check} ${/encoding=([^,)]+)/.exec(cell.detail ?? "")?.[1] ?? ""}`;

/** Runs one FAKE plugin over the suite and reads back its cells. */
export function runKernelFault(fault: KernelFault, suite: string, scratch: string, runsDir: string): KernelFaultRow {
  const plugin = buildFakePlugin(scratch, fault.fault);
  const runId = `kernel-${fault.fault}`;
  const result = spawnSync(process.execPath, [join(PACKAGE_ROOT, "bin", "bench.js"), "run", "--suite", suite, "--plugin", plugin, "--runs-dir", runsDir, "--run-id", runId], {
    cwd: PACKAGE_ROOT, encoding: "utf8", env: { ...process.env, NO_COLOR: "1" }, maxBuffer: 64 * 1024 * 1024,
  });
  const cells = readRun(runId, runsDir).cells.filter((c) => c.check !== "kernel_time");
  const caught = cells.filter((c) => c.status === "fail");
  const caughtPairs = new Set(caught.map(caseKey));
  return { fault, exitCode: result.status, cases: cells.length, caught, passedAlongside: cells.filter((c) => c.status === "pass" && caughtPairs.has(caseKey(c))).length };
}

const ratioText = (ratio: number | null | undefined) => (ratio == null ? "—" : Number.isFinite(ratio) ? ratio.toPrecision(3) : "∞");

/** `MATVEC(…,cols=64,seed=1006)` → the case's name; the reason after `FAIL (`, cut to a readable length. */
function caseAndReason(cell: CellRecord): string {
  const detail = cell.detail ?? "";
  const name = detail.slice(0, detail.indexOf(": "));
  const reason = /FAIL \((.*)\)$/.exec(detail)?.[1] ?? detail;
  return `\`${name}\`: ${reason.length > 110 ? `${reason.slice(0, 107)}…` : reason}`;
}

/** Strongest and weakest catch: the largest and the smallest ratio above 1 (bit and sentinel failures carry none). */
function catches(row: KernelFaultRow): string {
  // A failing case's ratio is its worst output's: below 1 when the failure is a sentinel or a bit mismatch, which says nothing here.
  const rated = row.caught.filter((c) => c.kernel_ratio != null && c.kernel_ratio > 1).sort((a, b) => (b.kernel_ratio ?? 0) - (a.kernel_ratio ?? 0));
  if (rated.length === 0) return row.caught.length === 0 ? "—" : caseAndReason(row.caught[0]);
  const strongest = rated[0];
  const weakest = rated[rated.length - 1];
  return rated.length === 1 ? caseAndReason(strongest) : `strongest ${caseAndReason(strongest)}; weakest ratio ${ratioText(weakest.kernel_ratio)} at \`${(weakest.detail ?? "").slice(0, (weakest.detail ?? "").indexOf(": "))}\``;
}

export function kernelFaultTable(rows: readonly KernelFaultRow[]): string[] {
  return [
    "| FAKE fault | what it plants | cases caught | same op/encoding cases still passing | catching case(s): one-line reason |",
    "|---|---|---|---|---|",
    ...rows.map((r) => `| ${r.fault.fault} | ${r.fault.what} | ${r.caught.length}/${r.cases}${r.caught.length === 0 ? " **NOT CAUGHT**" : ""} | ${r.passedAlongside} | ${catches(r).replace(/\|/g, "\\|")} |`),
  ];
}
