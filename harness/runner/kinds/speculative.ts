import { BenchError } from "../../errors.js";
import { resolveModel } from "../../fixtures/registry.js";
import { sha256File } from "../../io/sha256.js";
import { loadParitySuite } from "../../suites/load.js";
import type { SpeculativeArm, SpeculativeSuite } from "../../suites/speculative-suite.js";
import { stopManagedServer } from "../../sut/managed-server.js";
import { dialectOfferAt, openHttpSut } from "../../sut/http.js";
import { startServerCommand } from "../../sut/server-command.js";
import { caseTimeoutOf, timedCall, type CaseTimeout } from "../../sut/with-timeout.js";
import { armsByLabel, selectIndices } from "../arm-selection.js";
import { fillPlaceholders, type SutContext } from "../open-sut.js";
import type { ServerGreedy, SpeculatingServer } from "../checks/speculative/speculative-arm-state.js";
import { runSpeculativeArm } from "../speculative-runner.js";
import type { SuiteKind } from "./kind.js";

const DRAFT_PLACEHOLDER = "{draft}";

/** An arm's two argv: the plain server's, and the same with speculation appended, placeholders filled. */
async function armCommands(arm: SpeculativeArm): Promise<{ modelPath: string; plain: string[]; speculating: string[] }> {
  const model = await resolveModel(arm.model);
  const draftPath = arm.draft === undefined ? "" : (await resolveModel(arm.draft)).path;
  const fill = (part: string) => fillPlaceholders(part.replaceAll(DRAFT_PLACEHOLDER, draftPath), model.path);
  return { modelPath: model.path, plain: arm.command.map(fill), speculating: [...arm.command, ...arm.speculation].map(fill) };
}

/**
 * A dialect's timed greedy at a server (the speculating one, or the plain one started from the same
 * command): aborted with the leg, and held to the per-case timeout as the leg's SUT is (the runner
 * asks these servers directly, so a server that stops answering would otherwise hang the run).
 */
async function timedGreedyAt(baseUrl: string, dialect: string, label: string, caseTimeout: CaseTimeout, signal: AbortSignal): Promise<ServerGreedy> {
  // A server given up on once (its model list or any greedy request) is asked nothing more: every
  // request still open to it is aborted, so none leaves a connection open behind the error.
  const abandon = new AbortController();
  const giveUp = () => abandon.abort();
  const { speculativeGreedy } = await timedCall(label, `${baseUrl}/v1/models`, dialectOfferAt, caseTimeout, signal, giveUp)(baseUrl, dialect, AbortSignal.any([signal, abandon.signal]));
  if (speculativeGreedy === undefined) throw new Error(`the ${dialect} dialect has no timed greedy`);
  return timedCall(label, "timed greedy", speculativeGreedy, caseTimeout, signal, giveUp);
}

/** A `{draft}` with no draft model, or a draft model no argument reads, is a suite that cannot mean what it says. */
function assertDraftNamed(suite: SpeculativeSuite, arm: SpeculativeArm): void {
  const usesDraft = arm.speculation.some((part) => part.includes(DRAFT_PLACEHOLDER));
  if (usesDraft && arm.draft === undefined) {
    throw new BenchError(`arm "${arm.label}" passes ${DRAFT_PLACEHOLDER} but names no draft model`, { file: suite.path, field: "arms.draft", fix: "name the draft model (fixture[:QUANT] or .gguf) in the arm's draft" });
  }
  if (!usesDraft && arm.draft !== undefined) {
    throw new BenchError(`arm "${arm.label}" names draft ${arm.draft} but no argument passes ${DRAFT_PLACEHOLDER}`, { file: suite.path, field: "arms.speculation", fix: `add the server's draft-model flag with ${DRAFT_PLACEHOLDER} (llama-server: -md ${DRAFT_PLACEHOLDER}), or drop draft` });
  }
}

/** The prompts of the parity suite `prompts_of` names; a name that is no parity suite is this suite's bad input. */
function promptsOf(suite: SpeculativeSuite): readonly string[] {
  try {
    return loadParitySuite(suite.prompts_of).prompts;
  } catch (error) {
    if (!(error instanceof BenchError)) throw error;
    throw new BenchError(`prompts_of "${suite.prompts_of}": ${error.message}`, { file: suite.path, field: "prompts_of", fix: "name a parity suite, e.g. parity16" });
  }
}

/**
 * Speculative decoding under test: each arm's server started with speculation (the leg's SUT) and
 * without it (started beside it for the arm's check), the same greedy requests asked of both, in
 * the dialect whose probe saw the server draft (llama-server's /completion, or /v1/completions with
 * llama-server's `timings`, as our server answers).
 */
export const speculativeKind: SuiteKind<SpeculativeSuite, SpeculativeArm> = {
  arms(suite, options) {
    for (const arm of suite.arms) assertDraftNamed(suite, arm);
    promptsOf(suite);
    // A runner is no server that speculates: --runner leaves this suite nothing to run. --model keeps
    // the arms, as in a kernel suite: an arm's target and draft (or MTP block) go together.
    return options.runner !== undefined ? [] : armsByLabel(suite, options);
  },
  async run(suite, arms, battery) {
    const { options, emit } = battery;
    const prompts = promptsOf(suite);
    const promptIndices = selectIndices(prompts.length, options.prompts, "prompt index", "--prompt", suite.path);
    const caseTimeout = caseTimeoutOf(suite, options.caseTimeoutS);
    // Each arm's leg context, so that its plain server is started under the leg's hooks too (its stderr in the box evidence).
    const legContexts = new Map<SpeculativeArm, SutContext>();
    const open = async (arm: SpeculativeArm, context: SutContext) => {
      legContexts.set(arm, context);
      const { modelPath, speculating } = await armCommands(arm);
      const server = await startServerCommand(speculating, { label: arm.label, bootTimeoutS: context.bootTimeoutS, onProgress: context.onLog, onProcess: context.onProcess, signal: context.signal, shutdownGraceS: context.shutdownGraceS });
      try {
        return await openHttpSut(server.baseUrl, { label: arm.label, managed: server, command: server.argv, modelPath, modelSha256: await sha256File(modelPath), ...context });
      } catch (error) {
        await stopManagedServer(server, context.shutdownGraceS, context.onWarning);
        throw error;
      }
    };
    await battery.legs(suite, arms, open, async (arm, sut, opened, signal) => {
      const dialect = opened.dialects.found.speculativeGreedy;
      const speculating: SpeculatingServer = dialect === undefined
        ? { refusal: opened.dialects.missing.speculativeGreedy ?? "no dialect answered with draft counts" }
        : { open: () => timedGreedyAt(opened.baseUrl, dialect, arm.label, caseTimeout, signal) };
      return runSpeculativeArm({
        suiteName: suite.name, arm, sut, emit, signal, reproduce: battery.reproduce(suite, arm), gate: suite.checks.speculative_greedy,
        prompts: new Map(promptIndices.map((p) => [p, prompts[p]])), maxTokens: suite.max_tokens, concurrency: suite.concurrency,
        speculating,
        async withPlainServer(body) {
          // Asked only of a server that speculated when probed (the runner skips the rest first).
          if (dialect === undefined) throw new Error(`${arm.label}: no dialect to ask the plain server in`);
          const { plain: argv } = await armCommands(arm);
          const context = legContexts.get(arm);
          const progress = (line: string) => void emit({ kind: "progress", message: `${arm.label} (plain): ${line}` });
          const plain = await startServerCommand(argv, { label: `${arm.label} (plain)`, bootTimeoutS: options.box.settings.bootTimeoutS, onProgress: progress, onProcess: context?.onProcess, signal, shutdownGraceS: options.shutdownGraceS });
          try {
            // The speculating server's dialect: the plain one is the same command, less speculation.
            return await body(await timedGreedyAt(plain.baseUrl, dialect, `${arm.label} (plain)`, caseTimeout, signal));
          } finally {
            await stopManagedServer(plain, options.shutdownGraceS, context?.onWarning);
          }
        },
      });
    });
  },
};
