import { BenchError } from "../errors.js";
import { resolveModel } from "../fixtures/registry.js";
import { sha256File } from "../io/sha256.js";
import { httpCall } from "../sut/http-call.js";
import { startManagedServer, stopManagedServer } from "../sut/managed-server.js";
import type { LoadPlan } from "./plan.js";

/** The server a load run measures: a running one at --url, or ours started on --model for the run. */
export interface LoadServer {
  readonly baseUrl: string;
  /** The table's model column: the model a server started here runs, else the URL. */
  readonly label: string;
  /** The table's slots column; "–" for a server not started here. */
  readonly slots: string;
  /** The run's record of a server started here (its model file and settings). */
  readonly provenance: { suite: string; arm: string; provenance: Record<string, unknown> } | undefined;
  close(): Promise<void>;
}

/** Where the plan's server is: started here (a context sized to the prompts and outputs, one thread) or the running one it names. */
export async function openLoadServer(plan: LoadPlan, onProgress: (message: string) => void): Promise<LoadServer> {
  if ("url" in plan.server) return { baseUrl: plan.server.url, label: plan.server.url, slots: "–", provenance: undefined, close: async () => {} };
  const { slots } = plan.server;
  const model = await resolveModel(plan.server.model);
  const contextSize = Math.max(256, plan.prompts.inputTokens + plan.prompts.outputTokens + 64);
  const managed = await startManagedServer({ modelPath: model.path, slots, queue: 256, contextSize, threads: 1, flashAttention: false, bootTimeoutS: 600, onProgress });
  return {
    baseUrl: managed.baseUrl,
    label: model.id,
    slots: String(slots),
    provenance: { suite: "load", arm: model.id, provenance: { kind: "http", modelPath: model.path, modelSha256: await sha256File(model.path), engine: "bringup-bench server", settings: { slots } } },
    close: () => stopManagedServer(managed),
  };
}

/** The model a server serves, as its /v1/models lists it first. */
export interface ServedModel {
  readonly id: string;
  readonly capabilities?: { readonly tokenize?: boolean };
}

/** The first entry of /v1/models; a server without a usable listing still gets load (undefined: requests name the model "model"), with a warning. */
export async function firstServedModel(baseUrl: string, apiKey: string | undefined, warn: (message: string, hint?: string) => void): Promise<ServedModel | undefined> {
  const { status, text } = await httpCall(`${baseUrl}/v1/models`, { apiKey }).catch((error: Error) => {
    throw new BenchError(`cannot reach the server (${error.message})`, { field: "--url", fix: "start the server, or check the address" });
  });
  try {
    const first = (JSON.parse(text) as { data?: unknown[] }).data?.[0] as ServedModel | undefined;
    if (status === 200 && typeof first?.id === "string") return first;
  } catch {
    // Not JSON: reported below like any other unusable listing.
  }
  warn(`the server's /v1/models gave no model (HTTP ${status}): requests name the model "model"`, "check --url, or whether this server lists its models");
  return undefined;
}
