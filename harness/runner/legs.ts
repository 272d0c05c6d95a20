import type { RunDirectory } from "../results/run-directory.js";
import type { RunListener } from "../results/types.js";
import type { Suite } from "../suites/load.js";
import type { GateLevel, MemoryDeclaration } from "../suites/parity-suite.js";
import { RestartingRunner } from "../sut/restarting-runner.js";
import type { SystemUnderTest, TraceCapture } from "../sut/types.js";
import { caseTimeoutOf, SutStoppedError, withCaseTimeout } from "../sut/with-timeout.js";
import { runCheck } from "./check.js";
import { askAllocations } from "./memory-check.js";
import type { RunArm } from "./kinds/kind.js";
import type { SutContext } from "./open-sut.js";
import type { ResolvedRunOptions } from "./run-options.js";

/**
 * The trace-region demand a SUT reports, if it reports any. A malformed answer (or an error) is
 * the SUT's protocol error: it lands in the results as an error verdict of the arm, never a crash.
 */
async function askTraceDemand(suite: Suite, arm: { readonly label: string; readonly gate: GateLevel }, sut: SystemUnderTest, reproduce: string, emit: RunListener): Promise<TraceCapture[]> {
  if (sut.traceDemand === undefined) return [];
  let captures: TraceCapture[] = [];
  await runCheck({ suiteName: suite.name, arm, sut, emit, signal: new AbortController().signal, reproduce }, "trace_demand", "required", ["traceDemand"], async () => {
    captures = await sut.traceDemand!();
    const over = captures.filter(exceedsFixedRegion);
    const overflowing = over.map((c) => `${c.capture} demands ${c.demandBytes} B, its ${c.regionSemantics} region holds ${c.regionBytes} B`).join("; ");
    return {
      status: over.length === 0 ? "pass" : "fail",
      summary: `${arm.label} trace demand: ${captures.length} captured graphs reported${over.length === 0 ? "" : `; FAIL: ${overflowing}: the capture does not fit its trace region`}`,
      metrics: { captures: captures.length, over_region: over.length },
    };
  });
  return captures;
}

/** A capture that needs more than a fixed trace region holds cannot replay on the device (a dynamic region has no fixed size). */
function exceedsFixedRegion(capture: TraceCapture): boolean {
  return capture.regionSemantics !== "dynamic" && capture.demandBytes > capture.regionBytes;
}

/**
 * Opens each arm's SUT in turn (with the per-case timeout), hands it to `runArm`, and always closes
 * it. Around each arm, the box (harness/box/leg.ts): the device lock and a reset before a device
 * arm, the leg timeout once the SUT is up, and after it the reset a killed process calls for and
 * the arm's stderr tail and failure evidence.
 */
export async function runLegs<Arm extends { readonly label: string; readonly gate: GateLevel; readonly memory?: MemoryDeclaration }, Sut extends SystemUnderTest>(
  suite: Suite,
  arms: readonly Arm[],
  open: (arm: Arm, context: SutContext) => Promise<Sut>,
  options: ResolvedRunOptions,
  recorder: RunDirectory,
  emit: RunListener,
  runArm: RunArm<Arm, Sut>,
  reproduce: (arm: Arm) => string,
): Promise<void> {
  for (const arm of arms) {
    if (options.signal.aborted) return;
    const leg = await options.box.beginLeg(suite.name, arm);
    let summaryLine: string | undefined;
    try {
      // A board whose reset failed is in an unknown state: the arm does not run on it (leg.end() says why).
      if (leg.failedReset === undefined) {
        const context = { ...sutContext(arm, options, emit, leg.signal), ...leg.sutHooks };
        const opened = await open(arm, context);
        leg.startClock();
        const caseTimeout = caseTimeoutOf(suite, options.caseTimeoutS);
        // A runner that stops answering is replaced (restarting-runner.ts); an in-process SUT cannot be, and a server arm's timeout ends its checks.
        const sut = opened.provenance.kind === "stdio"
          ? new RestartingRunner(opened, { caseTimeout, limit: options.runnerRestarts, signal: leg.signal, open: () => open(arm, context), beforeRestart: (restart, why) => leg.restartRunner(restart, why) }).sut
          : withCaseTimeout(opened, caseTimeout, leg.signal);
        recorder.provenance.suts.push({ suite: suite.name, arm: arm.label, provenance: { ...sut.provenance } });
        await emit({ kind: "arm-start", suite: suite.name, arm: arm.label, sut: { ...sut.provenance } });
        try {
          ({ summaryLine } = await runArm(arm, sut, opened, leg.signal));
          // Asked after the checks, so every graph the SUT captured while serving them is counted (not after a stop: the SUT is being shut down).
          for (const capture of leg.signal.aborted ? [] : await askTraceDemand(suite, arm, sut, reproduce(arm), emit)) {
            recorder.provenance.trace.push({ suite: suite.name, arm: arm.label, capture: capture.capture, demand_bytes: capture.demandBytes, region_bytes: capture.regionBytes, region_semantics: capture.regionSemantics });
          }
          // Asked after the checks too: the peak is what the SUT held while serving them.
          if (!leg.signal.aborted) recorder.provenance.memory.push(...await askAllocations(suite, arm, sut, reproduce(arm), emit));
        } finally {
          await sut.close();
        }
      }
    } catch (error) {
      // The run was stopped while the arm booted or opened (or started a server of its own): the run ends interrupted, not in error.
      if (!(options.signal.aborted && error instanceof SutStoppedError)) throw error;
    } finally {
      const verdict = await leg.end();
      if (verdict !== undefined) await emit({ kind: "verdict", verdict });
    }
    await emit({ kind: "arm-end", suite: suite.name, arm: arm.label, summaryLine });
  }
}

/** A runner's log lines and shutdown warnings, as progress (a device runner may take minutes to boot); the leg's stop, which a boot listens to. */
function sutContext(arm: { readonly label: string }, options: ResolvedRunOptions, emit: RunListener, signal: AbortSignal): SutContext {
  const show = (line: string) => void emit({ kind: "progress", message: `${arm.label}: ${line}` });
  return { onLog: show, onWarning: show, shutdownGraceS: options.shutdownGraceS, bootTimeoutS: options.box.settings.bootTimeoutS, signal };
}
