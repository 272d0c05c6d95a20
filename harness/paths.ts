import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The package root: compiled files live in dist/harness/, sources in harness/. */
export const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), dirname(fileURLToPath(import.meta.url)).includes("/dist/") ? "../.." : "..");

/** Where built fixture models are cached (git-ignored). Override with BENCH_CACHE_DIR. */
export function modelCacheDir(): string {
  return process.env.BENCH_CACHE_DIR ?? resolve(PACKAGE_ROOT, ".cache", "models");
}

export const GOLDENS_DIR = resolve(PACKAGE_ROOT, "goldens");
export const SUITES_DIR = resolve(PACKAGE_ROOT, "suites");
export const RUNS_DIR = resolve(PACKAGE_ROOT, "reports", "runs");
export const KERNELS_DIR = resolve(PACKAGE_ROOT, "kernels");
/** Where `npm run build:native` puts the plugin host addon and the reference kernel plugin. */
export const NATIVE_BUILD_DIR = resolve(PACKAGE_ROOT, "native", "build");
