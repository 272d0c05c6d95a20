import type { LlamaModel } from "node-llama-cpp";
import type { AllocationReport } from "../../harness/sut/types.js";
import type { ChatPrompter } from "../chat-prompt.js";
import type { BatchEngine } from "../engine.js";
import type { ServedArtifact, ServerOptions } from "../server-options.js";
import type { StepTracer } from "../step-trace.js";

/** What a booted server serves with: a route that needs the model gets it from RouteContext.ready. */
export interface Ready {
  readonly engine: BatchEngine;
  readonly model: LlamaModel;
  readonly chat: ChatPrompter;
  /** Ids at or past it are outside the vocabulary (llama.cpp aborts the process on one). */
  readonly vocabSize: number;
  /** What llama.cpp allocated at boot, by device and group, and the shape asked (GET /allocations). */
  readonly allocations: AllocationReport;
}

/** What CompletionServer hands each route handler, so that a handler reads alone. */
export interface RouteContext {
  readonly options: ServerOptions;
  readonly trace: StepTracer | undefined;
  /** The loaded model and engine; throws a 503 HttpError while booting or draining. */
  ready(): Ready;
  /** The model file served, once hashed (undefined while booting). */
  served(): ServedArtifact | undefined;
}
