import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { PACKAGE_ROOT } from "../../harness/paths.js";

/** The planted faults test/helpers/fake_plugin.c knows (its header says what each one does). */
export type FakeFault =
  | "DOUBLE_BF16" | "UNWRITTEN_ROW" | "EXPERT_OFF" | "WINDOW_OFF" | "NO_STATE" | "UNREGISTERED"
  | "WRONG_Q4_K" | "HALF_ACCUM" | "NO_MATVEC" | "CRASH" | "ABI_3" | "V1" | "V1_NO_Q6_K"
  | "EPS_AFTER_SQRT" | "NO_MAX_SUB" | "LAST_ELEMENT" | "HEADS_TILED" | "DK_DV_SWAPPED" | "NO_OPS_EXPORT" | "NO_CONVENTIONS";

const NATIVE = join(PACKAGE_ROOT, "native");
const C_FLAGS = ["-O2", "-std=c11", "-ffp-contract=off", "-fPIC", `-I${join(NATIVE, "include")}`, `-I${join(NATIVE, "reference-plugin")}`];

/** The reference plugin's sources as native/binding.gyp builds them, less plugin.c (fake_plugin.c includes it). */
function referenceSources(): string[] {
  const gyp = JSON.parse(readFileSync(join(NATIVE, "binding.gyp"), "utf8")) as { targets: { target_name: string; sources: string[] }[] };
  const target = gyp.targets.find((t) => t.target_name === "bb_reference_plugin");
  if (target === undefined) throw new Error("native/binding.gyp has no bb_reference_plugin target");
  return target.sources.filter((s) => basename(s) !== "plugin.c").map((s) => join(NATIVE, s));
}

/**
 * Builds a FAKE plugin (the reference plugin with one planted fault) into `directory` and returns
 * its path. The reference kernels are compiled once per directory and linked into each fake.
 */
export function buildFakePlugin(directory: string, fault: FakeFault): string {
  const objects = join(directory, "fake-plugin-objects");
  const sources = referenceSources();
  const objectFiles = sources.map((s) => join(objects, `${basename(s, ".c")}.o`));
  if (!objectFiles.every(existsSync)) {
    mkdirSync(objects, { recursive: true });
    sources.forEach((source, i) => execFileSync("cc", [...C_FLAGS, "-c", "-o", objectFiles[i], source]));
  }
  const library = join(directory, `fake_${fault}.so`);
  execFileSync("cc", [...C_FLAGS, "-shared", `-DFAKE_${fault}`, "-o", library, join(PACKAGE_ROOT, "test", "helpers", "fake_plugin.c"), ...objectFiles, "-lm"]);
  return library;
}
