import type { RunDirectory } from "../../results/run-directory.js";
import type { RunListener } from "../../results/types.js";
import type { Suite } from "../../suites/load.js";
import type { GateLevel } from "../../suites/parity-suite.js";
import type { SystemUnderTest } from "../../sut/types.js";
import type { SutContext } from "../open-sut.js";
import type { ResolvedRunOptions } from "../run-options.js";

/** What the battery loop needs of any arm: its label, its gate, and the command that may need llama-server. */
export interface LegArm {
  readonly label: string;
  readonly gate: GateLevel;
  readonly command?: readonly string[];
}

/** What one arm's checks are run with: the SUT (wrapped with the case timeout or runner restarts), the SUT as opened, and the leg's signal. */
export type RunArm<Arm, Sut> = (arm: Arm, sut: SystemUnderTest, opened: Sut, signal: AbortSignal) => Promise<{ summaryLine: string | undefined }>;

/** The battery's side of a suite kind: the options, where results go, and the one way to run arms as legs. */
export interface Battery {
  readonly options: ResolvedRunOptions;
  readonly recorder: RunDirectory;
  readonly emit: RunListener;
  /**
   * Runs arms one after another as legs of the battery (harness/runner/legs.ts): each opened with
   * `open`, held to the box's lock, resets and leg timeout, its runner restarted when it stops
   * answering, asked for its trace demand after its checks, and always closed.
   */
  legs<Arm extends LegArm, Sut extends SystemUnderTest>(suite: Suite, arms: readonly Arm[], open: (arm: Arm, context: SutContext) => Promise<Sut>, runArm: RunArm<Arm, Sut>): Promise<void>;
  /** The command line that reruns one arm of the suite. */
  reproduce(suite: Suite, arm: LegArm & { readonly model?: string }): string;
}

/**
 * A suite kind as a plug-in of the battery: which arms a suite of this kind runs with the run's
 * options, and how the arms dealt to this run are run (what they share — goldens, an oracle —
 * and how each arm's SUT is opened and its checks run). The battery loop (run.ts) knows nothing
 * else of any kind; a new kind is a module implementing this and one line in registry.ts.
 */
export interface SuiteKind<S extends Suite, Arm extends LegArm> {
  /** The arms this suite runs with these options, before sharding (--arm, --model, --runner, --plugin applied). */
  arms(suite: S, options: ResolvedRunOptions): Arm[];
  /** Refuses, before any work, a selection that suites of this kind would otherwise ignore (all of the run's suites of this kind at once). */
  checkSelection?(suites: readonly S[], options: ResolvedRunOptions): void;
  /** Runs the arms this run was dealt (already sharded; never empty). */
  run(suite: S, arms: readonly Arm[], battery: Battery): Promise<void>;
  /** The label of the arm of the same suite whose results this arm reads (a reuse arm's prefill_reference): `--shard` deals the two to one shard. */
  referenceOf?(arm: Arm): string | undefined;
  /**
   * Whether a suite of this kind may run beside another suite of the run (`--jobs`): its verdicts
   * do not depend on how fast its legs run (a speed it records is then measured beside the other
   * suite: docs/cli.md#suites-side-by-side). Absent: it runs alone.
   */
  sharesMachine?(suite: S, options: ResolvedRunOptions): boolean;
  /** The command line that reruns one arm, when the kind's differs from `bench run --suite S --arm A`. */
  reproduce?(suite: S, arm: Arm, options: ResolvedRunOptions): string;
}
