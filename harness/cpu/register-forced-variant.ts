// Loaded through NODE_OPTIONS (--import) by every process of a run under a forced CPU variant:
// sends node-llama-cpp to the variant's folder before anything imports it (forced-variant.ts).
import { forcedCpuVariant } from "./cpu-identity.js";
import { registerVariantResolution, variantTree } from "./forced-variant.js";

const variant = forcedCpuVariant();
if (variant !== undefined) registerVariantResolution(variantTree(variant));
