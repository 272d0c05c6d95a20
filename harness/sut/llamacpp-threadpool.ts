import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import type { LlamaContext } from "node-llama-cpp";
import { PACKAGE_ROOT } from "../paths.js";

/** native/llama-threadpool's addon (threadpool.cc says why it exists). */
interface ThreadPoolAddon {
  attach(nativeContext: object, expected: { contextSize: number; sequences: number; batchSize: number; threads: number }, poll: number): number;
  release(id: number): void;
}

const ADDON_DIR = join(PACKAGE_ROOT, "native", "llama-threadpool", "build");

/** How long a pool's idle workers keep polling before they sleep: llama-server's default (`--poll 50`). */
const POLL = 50;

/**
 * How a context's graphs get their threads: a persistent pool we attached (workers poll between
 * graphs, as llama-server's do), or node-llama-cpp's default of threads created for every graph.
 */
export type ContextThreads =
  | { readonly kind: "persistent pool"; readonly release: () => void }
  | { readonly kind: "per graph"; readonly reason: string };

let addon: ThreadPoolAddon | string | undefined;

function loadAddon(): ThreadPoolAddon | string {
  const path = join(ADDON_DIR, "Release", "llama_threadpool.node");
  if (!existsSync(path)) {
    const failed = join(ADDON_DIR, "BUILD_FAILED");
    return existsSync(failed) ? `the thread-pool addon did not build: ${readFileSync(failed, "utf8").trim().split("\n").pop()}` : "the thread-pool addon is not built";
  }
  try {
    return createRequire(import.meta.url)(path) as ThreadPoolAddon;
  } catch (error) {
    return `the thread-pool addon did not load: ${(error as Error).message}`;
  }
}

let warned = false;

/**
 * Gives a multi-threaded context a persistent ggml thread pool. One thread needs none (ggml runs
 * it on the calling thread). Where the pool cannot be attached the context still works, only
 * slower on machines whose idle cores sleep deeply: said once on stderr, never silently.
 * `release` must run after the context is disposed.
 */
export function attachThreadPool(context: LlamaContext, expected: { contextSize: number; sequences: number; batchSize: number; threads: number }): ContextThreads {
  if (expected.threads <= 1) return { kind: "per graph", reason: "one thread runs on the calling thread" };
  addon ??= loadAddon();
  let outcome: ContextThreads;
  if (typeof addon === "string") {
    outcome = { kind: "per graph", reason: addon };
  } else {
    try {
      // `_ctx` is node-llama-cpp's native context (private in its typings; version pinned exactly).
      const id = addon.attach((context as unknown as { _ctx: object })._ctx, expected, POLL);
      const loaded = addon;
      outcome = { kind: "persistent pool", release: () => loaded.release(id) };
    } catch (error) {
      outcome = { kind: "per graph", reason: (error as Error).message };
    }
  }
  if (outcome.kind === "per graph" && !warned) {
    warned = true;
    process.stderr.write(`warning: llama.cpp creates its ${expected.threads} threads anew for every graph (${outcome.reason}); on machines whose idle cores sleep deeply each token can take ~25× longer\n  hint: npm run build:native (needs git, g++ and make)\n`);
  }
  return outcome;
}
