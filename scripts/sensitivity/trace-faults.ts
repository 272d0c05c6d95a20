/**
 * The capture faults of a traced decode, per family: the float64 reference runner's traced mode on
 * the goldens' own file (identity must PASS) with one FAULT of the capture planted
 * (harness/oracle/float64/reference/runner.py FAULTS), in the place of the family's arm of
 * suites/traced-families.json — its own command, so its stated trace region too. Each fault is one
 * bring-up bug, run on every family that has the mechanism it breaks (variants, not sizes); the
 * clean suite on the same prompts is the control. A catch's figure (the prompt and token where the
 * replay left the eager ids, the demand against the region, the two demands) is what a team needs
 * to find the capture, so the table shows it.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { SUITES_DIR } from "../../harness/paths.js";
import type { GateVerdict } from "../../harness/results/types.js";
import type { FaultFamily, FaultSize } from "./catalogue.js";

const SUITE = "traced-families";

interface TraceFault {
  readonly fault: string;
  readonly what: string;
  readonly families: readonly string[];
}

const ALL = ["qwen35", "qwen35moe", "gemma4", "nemotron_h_moe"];

const TRACE_FAULTS: readonly TraceFault[] = [
  { fault: "trace-routing-on-host", what: "the expert ids read back to the host inside the captured step: replay dispatches the captured step's experts", families: ["qwen35moe", "nemotron_h_moe"] },
  { fault: "trace-state-aliased", what: "the captured step binds the recurrent state array of the request it was captured in, not the state read through its inputs", families: ["qwen35", "qwen35moe", "nemotron_h_moe"] },
  { fault: "trace-weights-decoded", what: "each weight decoded per call inside the captured graph: every weight chain's decoded copy is a buffer of the capture", families: ALL },
  { fault: "trace-buffers-leak", what: "each capture keeps the buffers of the captures before it: demand differs between two captures", families: ALL },
  { fault: "trace-position-frozen", what: "the RoPE angles of the capture step baked into the trace (nemotron_h_moe has no RoPE)", families: ["qwen35", "qwen35moe", "gemma4"] },
];

/** The arm command of each family in the shipped suite, as one --runner string. */
function armCommands(): Map<string, string> {
  const suite = JSON.parse(readFileSync(join(SUITES_DIR, `${SUITE}.json`), "utf8")) as { arms: { label: string; command: string[] }[] };
  return new Map(suite.arms.map((arm) => [arm.label, arm.command.join(" ")]));
}

const armOf = (family: string): string => `${family} reference traced`;

export function traceFaultCatalogue(): FaultFamily[] {
  const commands = armCommands();
  const control: FaultSize = { label: "clean", prepare: async (_scratch, promptArgs) => ({ args: ["--suite", SUITE, ...promptArgs] }) };
  return TRACE_FAULTS.map((f): FaultFamily => ({
    name: `traced: ${f.fault}`,
    what: f.what,
    graded: false,
    behindIdentity: true,
    control,
    sizes: f.families.map((family): FaultSize => {
      const command = commands.get(armOf(family));
      if (command === undefined) throw new Error(`suites/${SUITE}.json has no arm "${armOf(family)}" for the trace fault catalogue`);
      return {
        label: family,
        prepare: async (_scratch, promptArgs) => ({ args: ["--suite", SUITE, "--arm", armOf(family), "--runner", `${command} --fault ${f.fault}`, ...promptArgs] }),
      };
    }),
  }));
}

/** The figure in each failed capture check's summary: where the replay diverged, which demand against which region, the two demands. */
const FIGURES: Readonly<Record<string, RegExp>> = {
  capture_parity: /prompt \d+: traced ids differ from eager at token \d+ \(eager \d+, traced \d+\), [A-Z-]+ \(max gap \d+ mnats\)/,
  capture_stable: /\S+: \d+ B then \d+ B/,
  trace_demand: /\S+ demands \d+ B, its \S+ region holds \d+ B/,
};

export function captureEvidence(verdicts: readonly GateVerdict[]): string {
  const figures = verdicts.flatMap((v) => {
    const pattern = FIGURES[v.check];
    if (pattern === undefined || v.gate !== "required" || v.status !== "fail" || !("summary" in v)) return [];
    const found = pattern.exec(v.summary);
    return found === null ? [] : [`${v.check}: ${found[0]}`];
  });
  return figures.length === 0 ? "" : ` (${figures.join("; ")})`;
}
