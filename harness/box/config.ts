import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { assertMatchesSchema, readJsonFile } from "../io/json-schema.js";
import { PACKAGE_ROOT } from "../paths.js";
import type { ConfiguredBatteries } from "./batteries.js";
import { configuredSignatures, shippedSignatures, type CompiledSignature } from "./evidence.js";

export const BOX_CONFIG_FILE = "bench.config.json";
const BOX_CONFIG_SCHEMA = join(PACKAGE_ROOT, "box", "config.schema.json");

/** bench.config.json as written (box/config.schema.json). */
interface BoxConfigFile {
  readonly device_lock?: { readonly path: string; readonly timeout_s?: number };
  readonly reset?: { readonly command: readonly string[]; readonly timeout_s?: number };
  readonly boot_timeout_s?: number;
  readonly leg_timeout_s?: number;
  readonly env?: Readonly<Record<string, string>>;
  readonly evidence?: { readonly stderr_lines?: number; readonly signatures?: readonly unknown[] };
  readonly batteries?: readonly unknown[];
}

/** What `bench run` flags may set on top of the file (each wins over the file's value). */
export interface BoxFlags {
  readonly config?: string;
  readonly deviceLock?: string;
  readonly lockTimeoutS?: number;
  readonly resetCommand?: readonly string[];
  readonly bootTimeoutS?: number;
  readonly legTimeoutS?: number;
}

/** How this run shares its box, resolved from bench.config.json and flags. */
export interface BoxSettings {
  /** The config file read, if any. */
  readonly file: string | undefined;
  readonly lock: { readonly path: string; readonly timeoutS: number } | undefined;
  readonly reset: { readonly command: readonly string[]; readonly timeoutS: number } | undefined;
  readonly bootTimeoutS: number;
  readonly legTimeoutS: number | undefined;
  readonly env: Readonly<Record<string, string>>;
  readonly stderrLines: number;
  readonly signatures: readonly CompiledSignature[];
  /** The team's validation batteries for `bench serve` (checked where they are used: harness/box/batteries.ts). */
  readonly batteries: ConfiguredBatteries | undefined;
}

export const DEFAULT_LOCK_TIMEOUT_S = 3600;
export const DEFAULT_RESET_TIMEOUT_S = 300;
/** Seconds a runner or harness-started server may take to boot (real devices take minutes). */
export const DEFAULT_BOOT_TIMEOUT_S = 600;
export const DEFAULT_STDERR_LINES = 200;

/**
 * Reads the box configuration: `--config FILE`, else bench.config.json in the working directory if
 * there is one, else none (defaults: no lock, no reset, no leg timeout). Flags win over the file.
 */
export function resolveBoxSettings(flags: BoxFlags = {}, cwd = process.cwd()): BoxSettings {
  const found = flags.config ?? (existsSync(join(cwd, BOX_CONFIG_FILE)) ? join(cwd, BOX_CONFIG_FILE) : undefined);
  const file = found === undefined ? undefined : resolve(cwd, found);
  const config = file === undefined ? {} : assertMatchesSchema<BoxConfigFile>(readJsonFile(file), BOX_CONFIG_SCHEMA, file);
  const base = file === undefined ? cwd : dirname(file);
  const lockPath = flags.deviceLock !== undefined ? resolve(cwd, flags.deviceLock) : config.device_lock === undefined ? undefined : resolve(base, config.device_lock.path);
  const resetCommand = flags.resetCommand ?? config.reset?.command;
  return {
    file,
    lock: lockPath === undefined ? undefined : { path: lockPath, timeoutS: flags.lockTimeoutS ?? config.device_lock?.timeout_s ?? DEFAULT_LOCK_TIMEOUT_S },
    reset: resetCommand === undefined || resetCommand.length === 0 ? undefined : { command: resetCommand, timeoutS: config.reset?.timeout_s ?? DEFAULT_RESET_TIMEOUT_S },
    bootTimeoutS: flags.bootTimeoutS ?? config.boot_timeout_s ?? DEFAULT_BOOT_TIMEOUT_S,
    legTimeoutS: flags.legTimeoutS ?? config.leg_timeout_s,
    env: config.env ?? {},
    stderrLines: config.evidence?.stderr_lines ?? DEFAULT_STDERR_LINES,
    batteries: config.batteries === undefined ? undefined : { file: file!, entries: config.batteries },
    signatures: [...shippedSignatures(), ...(config.evidence?.signatures === undefined ? [] : configuredSignatures(config.evidence.signatures, file!))],
  };
}

/** What summary.json records of the box settings (the signatures are data files, named by count). */
export function boxProvenance(box: BoxSettings): Record<string, unknown> {
  return {
    config: box.file ?? null,
    device_lock: box.lock === undefined ? null : { path: box.lock.path, timeout_s: box.lock.timeoutS },
    reset_command: box.reset === undefined ? null : [...box.reset.command],
    boot_timeout_s: box.bootTimeoutS,
    leg_timeout_s: box.legTimeoutS ?? null,
    env: Object.keys(box.env),
    signatures: box.signatures.length,
  };
}
