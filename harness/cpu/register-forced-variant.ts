// Loaded through NODE_OPTIONS (--import) by every process of a run under a forced CPU variant:
// sends node-llama-cpp to the variant's folder before anything imports it (forced-variant.ts).
import { realpathSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { PACKAGE_ROOT } from "../paths.js";
import { forcedCpuVariant } from "./cpu-identity.js";
import { registerVariantResolution, variantTree } from "./forced-variant.js";

// In a bench process this runs before bin/bench.js takes its signals: take them here already.
const benchBin = join(PACKAGE_ROOT, "bin", "bench.js");
const main = process.argv[1];
if (main !== undefined && (() => { try { return realpathSync(main) === realpathSync(benchBin); } catch { return false; } })()) {
  const { endSignalsWhileLoading } = await import(pathToFileURL(join(PACKAGE_ROOT, "bin", "while-loading.js")).href) as { endSignalsWhileLoading: () => void };
  endSignalsWhileLoading();
}

const variant = forcedCpuVariant();
if (variant !== undefined) registerVariantResolution(variantTree(variant));
