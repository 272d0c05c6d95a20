import { BenchError } from "../errors.js";
import { didYouMean } from "../registry/did-you-mean.js";
import { suiteArgument, type Suite } from "../suites/load.js";
import type { SuiteArm } from "../suites/parity-suite.js";
import { needsLlamaServer } from "../sut/llama-server-binary.js";
import type { ResolvedRunOptions } from "./run-options.js";

interface ArmsOf<Arm> {
  readonly arms: readonly Arm[];
}

/**
 * The suite's arms --arm names (all when none). Arms on llama-server run where it is built:
 * unnamed and unbuilt, they are left out with a note (run.ts); named, they fail loudly.
 */
export function armsByLabel<Arm extends { readonly label: string; readonly command?: readonly string[] }>(suite: ArmsOf<Arm>, options: ResolvedRunOptions): Arm[] {
  if (options.arms !== undefined) return suite.arms.filter((arm) => options.arms!.includes(arm.label));
  return suite.arms.filter((arm) => options.llamaServerBuilt || !needsLlamaServer(arm));
}

/**
 * The arms of a suite whose arms run models, with --runner and --model applied. Both keep an arm's
 * settings (a needle suite's context size, say) and swap what runs: the arm --arm names, else the
 * first. The template carries its oracle too (a family's goldens in a suite spanning families).
 */
export function modelArms<Arm extends { readonly label: string; readonly command?: readonly string[] }>(suite: ArmsOf<Arm>, options: ResolvedRunOptions): Arm[] {
  const named = armsByLabel(suite, options);
  const template = (named[0] ?? suite.arms[0]) as Arm & Pick<SuiteArm, "model">;
  // A runner takes no settings (armSettings): it reports its own in its hello.
  if (options.runner !== undefined) {
    // Nor the arm's memory check: it was declared for the SUT the runner replaces, whose budget and reporting are its own.
    return [{ ...template, label: "runner", model: options.model ?? template.model, sut: "stdio", command: options.runner, gate: "required", why: undefined, settings: undefined, memory: undefined }];
  }
  // With --arm, --model swaps the model of the arms named and keeps their SUT (a server arm serves the new model) and oracle.
  if (options.model !== undefined) {
    const model = options.model;
    if (options.arms === undefined) return [{ ...template, label: model, model, gate: "required", why: undefined }];
    return named.map((arm) => ({ ...arm, label: modelOverrideLabel(arm.label, model), model, gate: "required", why: undefined }));
  }
  return named;
}

/** An arm run on another model (--arm with --model) says both. */
function modelOverrideLabel(armLabel: string, model: string): string {
  return `${armLabel} on ${model}`;
}

/** Every --arm must name an arm of some suite in the run. */
export function assertArmsExist(suites: readonly Suite[], options: ResolvedRunOptions): void {
  const labels = suites.flatMap((suite) => suite.arms.map((arm) => arm.label));
  for (const label of options.arms ?? []) {
    if (!labels.includes(label)) {
      throw new BenchError(`no arm "${label}" in ${suites.map((s) => s.name).join(", ")}${didYouMean(label, labels)}`, {
        file: suites[0]?.path, field: "arms", fix: `use one of ${labels.map((l) => JSON.stringify(l)).join(", ")}`,
      });
    }
  }
}

/** The indices `--prompt` / `--case` asked for (all when none), each checked against the suite's count. */
export function selectIndices(count: number, requested: readonly number[] | undefined, what: string, field: string, file?: string): number[] {
  if (requested === undefined) return Array.from({ length: count }, (_, i) => i);
  for (const i of requested) {
    if (!Number.isInteger(i) || i < 0 || i >= count) throw new BenchError(`${what} ${i} is out of range`, { file, field, fix: `use 0..${count - 1}` });
  }
  return [...requested];
}

/** The command line that reruns one arm of a suite whose arms run models (--arm, or the --model / --runner that made it). */
export function armCommand(suite: Suite, arm: { readonly label: string; readonly model?: string }, options: ResolvedRunOptions): string {
  const model = options.model === undefined ? "" : ` --model ${options.model}`;
  const overridden = options.model === undefined ? undefined : options.arms?.find((label) => modelOverrideLabel(label, options.model!) === arm.label);
  // A runner takes the place of the arm --arm names (its oracle, in a suite spanning families), so the line names it too.
  const template = options.arms === undefined ? undefined : suite.arms.find((candidate) => options.arms!.includes(candidate.label));
  const runnerArm = template === undefined ? "" : ` --arm ${JSON.stringify(template.label)}`;
  const target = options.runner !== undefined ? `--runner ${JSON.stringify(options.runner.join(" "))}${model}${runnerArm}`
    : overridden !== undefined ? `--arm ${JSON.stringify(overridden)} --model ${arm.model}`
    : options.model !== undefined ? `--model ${arm.model}` : `--arm ${JSON.stringify(arm.label)}`;
  return `bench run --suite ${suiteArgument(suite)} ${target}`;
}
