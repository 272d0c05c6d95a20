import { readFileSync } from "node:fs";
import { join } from "node:path";
import { BenchError } from "../errors.js";
import { sha256Bytes } from "../io/sha256.js";
import { writeDirectoryAtomic, writeFileAtomic } from "../io/atomic-write.js";
import { GOLDENS_DIR } from "../paths.js";
import type { TokenId } from "../sut/types.js";
import { readManifest, type GoldensManifest } from "./manifest.js";
import { encodeNpy, readNpyFloat32, readNpyInt32 } from "./npy.js";

/** Goldens in memory: what the oracle said, per prompt. */
export interface Goldens {
  readonly manifest: GoldensManifest;
  readonly directory: string;
  /** Prompt ids (BOS included), unpadded. */
  readonly promptIds: readonly (readonly TokenId[])[];
  /** [P][T] oracle greedy ids. */
  readonly greedyIds: readonly (readonly TokenId[])[];
  /** [P][T][K] oracle teacher-forced top-k on its own greedy continuation (absent when K = 0). */
  readonly topkIds?: readonly (readonly (readonly TokenId[])[])[];
  readonly topkLogprobs?: readonly (readonly (readonly number[])[])[];
}

export const PROMPT_PAD = -1;

export function goldensDir(modelName: string, suite: string): string {
  return join(GOLDENS_DIR, modelName, suite);
}

/** Canonical hash of prompt ids: what the SUT must be fed. */
export function promptIdsSha256(promptIds: readonly (readonly TokenId[])[]): string {
  return sha256Bytes(JSON.stringify(promptIds));
}

export function promptTextsSha256(texts: readonly string[]): string {
  return sha256Bytes(JSON.stringify(texts));
}

function rows<T>(flat: ArrayLike<T>, count: number, width: number): T[][] {
  return Array.from({ length: count }, (_, r) => Array.from({ length: width }, (_, c) => flat[r * width + c]));
}

/** Writes a goldens directory atomically: all files and the manifest appear together or not at all. */
export async function writeGoldens(
  directory: string,
  data: Omit<Goldens, "manifest" | "directory">,
  manifest: Omit<GoldensManifest, "files">,
): Promise<GoldensManifest> {
  const P = data.promptIds.length;
  const T = manifest.T;
  const K = manifest.K;
  const width = Math.max(...data.promptIds.map((ids) => ids.length));
  const padded = new Int32Array(P * width).fill(PROMPT_PAD);
  data.promptIds.forEach((ids, p) => padded.set(ids, p * width));
  const arrays: Record<string, Uint8Array> = {
    "prompt_ids.npy": encodeNpy(padded, [P, width]),
    "greedy_ids.npy": encodeNpy(Int32Array.from(data.greedyIds.flat()), [P, T]),
  };
  if (K > 0 && data.topkIds !== undefined && data.topkLogprobs !== undefined) {
    arrays["topk_ids.npy"] = encodeNpy(Int32Array.from(data.topkIds.flat(2)), [P, T, K]);
    arrays["topk_logprobs.npy"] = encodeNpy(Float32Array.from(data.topkLogprobs.flat(2)), [P, T, K]);
  }
  const files = Object.fromEntries(Object.entries(arrays).map(([name, bytes]) => [name, sha256Bytes(bytes)]));
  const complete: GoldensManifest = { ...manifest, files };
  await writeDirectoryAtomic(directory, async (temporary) => {
    for (const [name, bytes] of Object.entries(arrays)) await writeFileAtomic(join(temporary, name), bytes);
    await writeFileAtomic(join(temporary, "manifest.json"), `${JSON.stringify(complete, null, 2)}\n`);
  });
  return complete;
}

/** Reads a goldens directory, checking file hashes and shapes against the manifest. */
export function readGoldens(directory: string): Goldens {
  const manifestPath = join(directory, "manifest.json");
  const manifest = readManifest(manifestPath);
  for (const [name, expected] of Object.entries(manifest.files)) {
    let actual: string;
    try {
      actual = sha256Bytes(readFileSync(join(directory, name)));
    } catch {
      throw new BenchError("file listed in the manifest is missing", { file: join(directory, name), fix: "re-make the goldens with `bench goldens make`" });
    }
    if (actual !== expected) {
      throw new BenchError(`sha256 ${actual.slice(0, 12)}… does not match the manifest's ${expected.slice(0, 12)}…`, {
        file: join(directory, name), field: `files.${name}`, fix: "the file was edited; re-make the goldens",
      });
    }
  }
  const prompts = readNpyInt32(join(directory, "prompt_ids.npy"), 2);
  const greedy = readNpyInt32(join(directory, "greedy_ids.npy"), 2);
  const [P, width] = prompts.shape;
  const expectShape = (file: string, shape: readonly number[], want: readonly number[]): void => {
    if (shape.join(",") !== want.join(",")) {
      throw new BenchError(`shape (${shape.join(", ")}) does not match the manifest's (${want.join(", ")})`, {
        file: join(directory, file), field: "shape", fix: "re-make or re-import the goldens",
      });
    }
  };
  expectShape("prompt_ids.npy", [P], [manifest.prompts.count]);
  expectShape("greedy_ids.npy", greedy.shape, [P, manifest.T]);
  const promptIds = rows(prompts.data, P, width).map((ids) => ids.filter((id) => id !== PROMPT_PAD));
  const goldens: Goldens = { manifest, directory, promptIds, greedyIds: rows(greedy.data, P, manifest.T) };
  if (manifest.K === 0 || manifest.files["topk_ids.npy"] === undefined) return goldens;
  const topkIds = readNpyInt32(join(directory, "topk_ids.npy"), 3);
  const topkLogprobs = readNpyFloat32(join(directory, "topk_logprobs.npy"), 3);
  expectShape("topk_ids.npy", topkIds.shape, [P, manifest.T, manifest.K]);
  expectShape("topk_logprobs.npy", topkLogprobs.shape, [P, manifest.T, manifest.K]);
  // A NaN or positive log-prob would score every SUT against nonsense: refuse the file instead.
  const bad = topkLogprobs.data.findIndex((value) => !(value <= 0));
  if (bad >= 0) {
    throw new BenchError(`value ${topkLogprobs.data[bad]} at flat index ${bad} is not a log-probability (finite, ≤ 0)`, {
      file: join(directory, "topk_logprobs.npy"), field: `[${bad}]`, fix: "re-make the goldens with `bench goldens make`",
    });
  }
  const K = manifest.K;
  const cube = <T>(flat: ArrayLike<T>): T[][][] => rows(flat, P, manifest.T * K).map((row) => rows(row, manifest.T, K));
  return { ...goldens, topkIds: cube(topkIds.data), topkLogprobs: cube(topkLogprobs.data) };
}
