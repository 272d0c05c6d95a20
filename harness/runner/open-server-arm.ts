import { BenchError } from "../errors.js";
import { resolveModel } from "../fixtures/registry.js";
import { sha256File } from "../io/sha256.js";
import type { RunListener } from "../results/types.js";
import type { ConformanceArm, ConformanceSuite } from "../suites/conformance-suite.js";
import { startManagedServer, stopManagedServer } from "../sut/managed-server.js";
import { openHttpSut } from "../sut/http.js";
import { startServerCommand } from "../sut/server-command.js";
import { apiKeyOf, fillPlaceholders, type SutContext } from "./open-sut.js";

/** What opening a server arm reads of it: a conformance arm's server fields, all optional but its label. */
export type ServerArm = Pick<ConformanceArm, "label"> & Partial<Pick<ConformanceArm, "model" | "url" | "api_key_env" | "command" | "server">>;

/** A server arm's server (conformance, chat-template): a running one at `url`, one its command starts, or ours started on loopback for the arm. */
export async function openServerArm(suite: Pick<ConformanceSuite, "path">, arm: ServerArm, context: SutContext, emit: RunListener) {
  if (arm.url !== undefined) return openHttpSut(arm.url, { label: arm.label, apiKey: apiKeyOf(arm), bootTimeoutS: context.bootTimeoutS, signal: context.signal });
  if (arm.model === undefined) throw new BenchError(`arm "${arm.label}" names neither a model nor a url`, { file: suite.path, field: "arms", fix: "give it a model (our server, or its command's, is started on it) or the url of a running server" });
  const model = await resolveModel(arm.model);
  const onProgress = (message: string) => void emit({ kind: "progress", message });
  const started = arm.command === undefined ? undefined
    : await startServerCommand(arm.command.map((part) => fillPlaceholders(part, model.path)), { label: arm.label, bootTimeoutS: context.bootTimeoutS, onProgress, onProcess: context.onProcess, signal: context.signal, shutdownGraceS: context.shutdownGraceS });
  const managed = started ?? await startManagedServer({
    modelPath: model.path, slots: arm.server?.slots ?? 2, queue: arm.server?.queue ?? 1, contextSize: 1024, threads: 1, flashAttention: false,
    bootTimeoutS: context.bootTimeoutS, simulateBootSeconds: arm.server?.simulate_boot_s ?? 0, onProgress, onProcess: context.onProcess,
    signal: context.signal, shutdownGraceS: context.shutdownGraceS,
  });
  try {
    return await openHttpSut(managed.baseUrl, { label: arm.label, managed, modelPath: model.path, modelSha256: await sha256File(model.path), apiKey: apiKeyOf(arm), command: started?.argv, ...context });
  } catch (error) {
    await stopManagedServer(managed, context.shutdownGraceS, context.onWarning);
    throw error;
  }
}
