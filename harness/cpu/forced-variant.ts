import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { register } from "node:module";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { writeFileAtomicSync } from "../io/atomic-write.js";
import { PACKAGE_ROOT } from "../paths.js";
import { cpuFeatures } from "./cpu-identity.js";
import { VARIANT_EXTENSIONS } from "./variant-features.js";

/**
 * Running llama.cpp under a ggml CPU library other than the one ggml would pick, without touching
 * the shared install. node-llama-cpp loads ggml's CPU libraries from the folder it found its addon
 * in and keeps the best one this CPU can run. So each forced variant gets a folder of its own,
 * `.cache/cpu-variants/<variant>/node_modules`: every package linked to the real one but
 * node-llama-cpp, whose copy holds a registered build (the install's, scripts/trust-llama-binary.js)
 * that links the addon, llama.cpp and that one CPU library. A module resolve hook sends every
 * `import "node-llama-cpp"` of the process there, and NODE_OPTIONS carries the hook to every child
 * process (our server, test files, llama.cpp probes), so a whole run computes with one variant.
 */

const NODE_MODULES = join(PACKAGE_ROOT, "node_modules");
const REGISTERED_BUILD = join(NODE_MODULES, "node-llama-cpp", "llama", "localBuilds", "linux-x64");
const CPU_LIBRARY = /^libggml-cpu-(\w+)\.so$/;
const VARIANTS_DIR = join(PACKAGE_ROOT, ".cache", "cpu-variants");
const REGISTER_MODULE = fileURLToPath(new URL("./register-forced-variant.js", import.meta.url));

export class CpuVariantError extends Error {}

/** The ggml CPU libraries this install ships, by variant name, narrowest instruction set first (empty where there is no registered build: off linux-x64, or an install whose registration failed). */
export function shippedCpuVariants(): readonly string[] {
  try {
    const rank = (name: string): number => { const at = Object.keys(VARIANT_EXTENSIONS).indexOf(name); return at === -1 ? Infinity : at; };
    return readdirSync(join(REGISTERED_BUILD, "Release")).flatMap((file) => CPU_LIBRARY.exec(file)?.[1] ?? []).sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  } catch {
    return [];
  }
}

/** What a forced tree was made from: rebuilt when the install under it changes (`npm ci` replaces node_modules, not .cache). */
function installStamp(): string {
  const version = JSON.parse(readFileSync(join(NODE_MODULES, "node-llama-cpp", "package.json"), "utf8")).version as string;
  return JSON.stringify({ version, build: readFileSync(join(REGISTERED_BUILD, "Release", "_nlcBuildMetadata.json"), "utf8") });
}

function checkName(variant: string): void {
  const shipped = shippedCpuVariants();
  if (shipped.length === 0) {
    throw new CpuVariantError(`--cpu-variant ${variant}: this install has no registered llama.cpp build to take CPU libraries from (${REGISTERED_BUILD}); run node scripts/trust-llama-binary.js (linux-x64 only)`);
  }
  if (!shipped.includes(variant)) throw new CpuVariantError(`--cpu-variant ${variant}: not a ggml CPU variant this install ships; use one of ${shipped.join(", ")} (bench cpu-variants lists which load here)`);
}

/** The folder of a forced variant, made (atomically: built aside, then renamed) if absent or made from another install. */
export function variantTree(variant: string): string {
  checkName(variant);
  const tree = join(VARIANTS_DIR, variant);
  const stamp = installStamp();
  const stampFile = join(tree, "install.json");
  if (existsSync(stampFile) && readFileSync(stampFile, "utf8") === stamp) return tree;

  const staging = `${tree}.tmp-${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  const modules = join(staging, "node_modules");
  mkdirSync(modules, { recursive: true });
  for (const entry of readdirSync(NODE_MODULES)) {
    // No package is named node_modules: such an entry is a stray link (a second `ln -s` of a linked
    // node_modules lands inside it), and linking it would let resolution escape to the shared install.
    if (entry !== "node-llama-cpp" && entry !== "node_modules") symlinkSync(join(NODE_MODULES, entry), join(modules, entry));
  }
  const realPackage = join(NODE_MODULES, "node-llama-cpp");
  const copy = join(modules, "node-llama-cpp");
  mkdirSync(copy);
  for (const entry of readdirSync(realPackage)) {
    // dist is copied, not linked: node-llama-cpp finds its llama/ folder from its own files' paths.
    if (entry === "dist") cpSync(join(realPackage, entry), join(copy, entry), { recursive: true });
    else if (entry !== "llama") symlinkSync(join(realPackage, entry), join(copy, entry));
  }
  mkdirSync(join(copy, "llama"));
  for (const entry of readdirSync(join(realPackage, "llama"))) {
    if (entry !== "localBuilds") symlinkSync(join(realPackage, "llama", entry), join(copy, "llama", entry));
  }
  const release = join(copy, "llama", "localBuilds", "linux-x64", "Release");
  mkdirSync(release, { recursive: true });
  for (const file of readdirSync(join(REGISTERED_BUILD, "Release"))) {
    const source = join(REGISTERED_BUILD, "Release", file);
    const library = CPU_LIBRARY.exec(file)?.[1];
    if (file === "_nlcBuildMetadata.json") cpSync(source, join(release, file));
    else if (library === undefined || library === variant) symlinkSync(realpathSync(source), join(release, file));
  }
  cpSync(join(REGISTERED_BUILD, "buildDone.status"), join(copy, "llama", "localBuilds", "linux-x64", "buildDone.status"));
  writeFileSync(join(staging, "install.json"), stamp);
  rmSync(tree, { recursive: true, force: true });
  try {
    renameSync(staging, tree);
  } catch (error) {
    rmSync(staging, { recursive: true, force: true });
    if (!existsSync(stampFile)) throw error; // another process made the same tree at the same moment: take theirs
  }
  return tree;
}

/** Sends this process's `import "node-llama-cpp"` to a forced variant's tree (before anything imports it). */
export function registerVariantResolution(tree: string): void {
  register(new URL("./variant-resolve-hook.js", import.meta.url), { data: { anchor: pathToFileURL(join(tree, "node_modules", "anchor.js")).href } });
}

/** What a probe of one variant found: the library llama.cpp loaded under it, or why it could not load. */
export interface VariantProbe {
  readonly variant: string;
  readonly loads: boolean;
  readonly detail: string;
}

/** Loads llama.cpp in a child process under `variant` (or ggml's own choice where undefined) and reports the CPU library it mapped. */
function probe(variant: string | undefined): { loaded?: string; error?: string } {
  const env: NodeJS.ProcessEnv = { ...process.env, BENCH_CPU_VARIANT: variant ?? "" };
  const args = variant === undefined ? [] : ["--import", pathToFileURL(REGISTER_MODULE).href];
  const child = spawnSync(process.execPath, [...args, fileURLToPath(new URL("./variant-probe.js", import.meta.url))], { env, encoding: "utf8", timeout: 120_000 });
  const last = child.stdout?.trim().split("\n").at(-1) ?? "";
  try {
    return JSON.parse(last) as { loaded?: string; error?: string };
  } catch {
    const why = (child.stderr || child.error?.message || `exit ${child.status ?? child.signal}`).trim().split("\n").at(-1);
    return { error: `llama.cpp could not start: ${why}` };
  }
}

/** Whether `variant` loads on this CPU, probed once per tree and remembered there; with the tree. */
export function probeVariant(variant: string): VariantProbe & { readonly tree: string } {
  const tree = variantTree(variant);
  const file = join(tree, "probe.json");
  const fingerprint = `${cpuFeatures().join(" ")}`;
  if (existsSync(file)) {
    const cached = JSON.parse(readFileSync(file, "utf8")) as VariantProbe & { fingerprint: string };
    if (cached.fingerprint === fingerprint) return { variant: cached.variant, loads: cached.loads, detail: cached.detail, tree };
  }
  const found = probe(variant);
  const result: VariantProbe = found.loaded === variant
    ? { variant, loads: true, detail: `loads libggml-cpu-${variant}.so` }
    : { variant, loads: false, detail: found.error ?? (found.loaded === "none" ? `this CPU lacks instructions ${variant} was built for, so ggml loads no CPU library` : `ggml loaded ${found.loaded} instead`) };
  writeFileAtomicSync(file, JSON.stringify({ ...result, fingerprint }));
  return { ...result, tree };
}

/**
 * The variant ggml picks on this CPU when none is forced ("unknown" where llama.cpp does not load),
 * probed once per CPU and install and remembered in .cache/cpu-variants/default.json.
 */
export function defaultCpuVariant(): string {
  const file = join(VARIANTS_DIR, "default.json");
  let key: string;
  try {
    key = `${cpuFeatures().join(" ")}|${installStamp()}`;
  } catch {
    return "unknown"; // no registered build: off linux-x64, where ggml's variants are not ours to name
  }
  try {
    const cached = JSON.parse(readFileSync(file, "utf8")) as { key: string; variant: string };
    if (cached.key === key) return cached.variant;
  } catch {
    // not probed yet on this install
  }
  const variant = probe(undefined).loaded ?? "unknown";
  writeFileAtomicSync(file, JSON.stringify({ key, variant }));
  return variant;
}

/**
 * Makes `variant` the CPU library of this process and every process it starts: checks that it
 * loads on this CPU, then sets BENCH_CPU_VARIANT and NODE_OPTIONS for the children and the resolve
 * hook for this process. Throws a CpuVariantError (one line: the variant and the fix) otherwise.
 */
export function forceCpuVariant(variant: string): void {
  const found = probeVariant(variant);
  if (!found.loads) throw new CpuVariantError(`--cpu-variant ${variant}: cannot run on this CPU: ${found.detail}; bench cpu-variants lists the ones that load here`);
  process.env.BENCH_CPU_VARIANT = variant;
  const carry = `--import=${pathToFileURL(REGISTER_MODULE).href}`;
  if (!(process.env.NODE_OPTIONS ?? "").includes(carry)) process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ""} ${carry}`.trim();
  registerVariantResolution(found.tree);
}
